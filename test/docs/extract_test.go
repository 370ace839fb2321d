package docs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModeOf(t *testing.T) {
	tests := map[string]struct {
		info    string
		want    Mode
		wantErr bool
	}{
		"sh runs":               {info: "sh", want: Run},
		"sh background":         {info: "sh background", want: Background},
		"extra spaces":          {info: "  sh   background ", want: Background},
		"console is shown":      {info: "console", want: Show},
		"nginx is shown":        {info: "nginx", want: Show},
		"no info string":        {info: "", want: Show},
		"shell is not sh":       {info: "shell", want: Show},
		"unknown sh attribute":  {info: "sh backgroud", wantErr: true},
		"two attributes":        {info: "sh background now", wantErr: true},
		"yaml with a sh inside": {info: "yaml sh", want: Show},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ModeOf(tc.info)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mode (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := map[string]struct {
		src     string
		want    []Block
		wantErr string
	}{
		"info strings and modes": {
			src: "# T\n```sh\necho a\n```\ntext\n```sh background\nmake run\n```\n```yaml\nk: v\n```\n",
			want: []Block{
				{Line: 2, Info: "sh", Mode: Run, Body: []string{"echo a"}},
				{Line: 6, Info: "sh background", Mode: Background, Body: []string{"make run"}},
				{Line: 9, Info: "yaml", Mode: Show, Body: []string{"k: v"}},
			},
		},
		"a fence inside a longer one is content": {
			src: "````markdown\n```sh\nrm -rf /\n```\n````\n",
			want: []Block{
				{Line: 1, Info: "markdown", Mode: Show, Body: []string{"```sh", "rm -rf /", "```"}},
			},
		},
		"tildes close only tildes": {
			src: "~~~sh\n```\necho x\n~~~\n",
			want: []Block{
				{Line: 1, Info: "sh", Mode: Run, Body: []string{"```", "echo x"}},
			},
		},
		"a closing fence takes no info string": {
			src: "```sh\n```sh\n```\n",
			want: []Block{
				{Line: 1, Info: "sh", Mode: Run, Body: []string{"```sh"}},
			},
		},
		"indented in a list: unindented by the fence's indentation": {
			src: "- item\n\n  ```sh\n  echo in\n    echo deeper\n  ```\n",
			want: []Block{
				{Line: 3, Info: "sh", Mode: Run, Body: []string{"echo in", "  echo deeper"}},
			},
		},
		"empty block": {
			src:  "```sh\n```\n",
			want: []Block{{Line: 1, Info: "sh", Mode: Run}},
		},
		"inline backticks are no fence": {
			src: "say ```sh``` inline\n",
		},
		"unclosed": {
			src:     "text\n```sh\necho a\n",
			wantErr: "line 2: the block opened here is never closed",
		},
		"unknown attribute names its line": {
			src:     "\n\n```sh later\n```\n",
			wantErr: `line 3: info string "sh later"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("blocks (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSection(t *testing.T) {
	doc := strings.Join([]string{
		"# unitlet",               // 1
		"## Quick start",          // 2
		"```sh",                   // 3
		"# a comment, no heading", // 4
		"## nor this",             // 5
		"```",                     // 6
		"### a subsection stays",  // 7
		"## Next",                 // 8
		"#hashtag is no heading",  // 9
	}, "\n")
	tests := map[string]struct {
		src, heading string
		from, to     int
		wantErr      string
	}{
		"up to the next heading of its level": {src: doc, heading: "## Quick start", from: 2, to: 8},
		"to the end of the file":              {src: doc, heading: "## Next", from: 8, to: 10},
		"a higher heading ends it":            {src: "## A\nx\n# B\n", heading: "## A", from: 1, to: 3},
		"a heading in a block is no section":  {src: doc, heading: "## nor this", wantErr: "no section"},
		"missing":                             {src: doc, heading: "## Install", wantErr: `no section "## Install"`},
		"not a heading":                       {src: doc, heading: "Quick start", wantErr: "is not a heading"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			from, to, err := Section(tc.src, tc.heading)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2]int{tc.from, tc.to}, [2]int{from, to}); diff != "" {
				t.Errorf("[from, to) (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWithin(t *testing.T) {
	blocks := []Block{{Line: 1}, {Line: 5}, {Line: 9}}
	got := Within(blocks, 5, 9)
	if diff := cmp.Diff([]Block{{Line: 5}}, got); diff != "" {
		t.Errorf("blocks (-want,+got):\n%s", diff)
	}
}

func TestScriptKeepsTheMarkdownsLines(t *testing.T) {
	src := "# T\n```sh\necho a\necho b\n```\nprose\n```sh background\nmake run\n```\n"
	blocks, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Script(strings.Count(src, "\n")+1, blocks)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	want := map[int]string{
		1: preamble,
		2: "__docs_block 2",
		3: "echo a",
		4: "echo b",
		5: "",
		6: "",
		7: "__docs_block 7; __docs_bg 7 <<'__DOCS_EOF_7'",
		8: "make run",
		9: "__DOCS_EOF_7",
	}
	for n, w := range want {
		if diff := cmp.Diff(w, lines[n-1]); diff != "" {
			t.Errorf("line %d (-want,+got):\n%s", n, diff)
		}
	}
}

func TestScriptRefuses(t *testing.T) {
	tests := map[string]struct {
		n       int
		blocks  []Block
		wantErr string
	}{
		"a shown block": {n: 5, blocks: []Block{{Line: 1, Info: "yaml", Mode: Show}}, wantErr: "only shown"},
		"the heredoc's end in a background body": {
			n: 5, blocks: []Block{{Line: 1, Mode: Background, Body: []string{"__DOCS_EOF_1"}}}, wantErr: "holds the line",
		},
		"past the end": {n: 2, blocks: []Block{{Line: 1, Mode: Run, Body: []string{"a", "b"}}}, wantErr: "past the file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Script(tc.n, tc.blocks)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := map[string]struct {
		out            string
		want           []Piece
		line, exitCode int
	}{
		"each block's output": {
			out:  "##docs-block 3\na\n##docs-block 9\nb\nc\n",
			want: []Piece{{Line: 3, Output: "a\n"}, {Line: 9, Output: "b\nc\n"}},
		},
		"a silent block is still a piece": {
			out:  "##docs-block 3\n##docs-block 9\nb\n",
			want: []Piece{{Line: 3, Output: ""}, {Line: 9, Output: "b\n"}},
		},
		"output before the first block": {
			out:  "early\n##docs-block 3\n",
			want: []Piece{{Line: 0, Output: "early\n"}, {Line: 3, Output: ""}},
		},
		"the failing line and code": {
			out:  "##docs-block 3\nnope: not found\n\n##docs-fail 4 127\n",
			want: []Piece{{Line: 3, Output: "nope: not found\n\n"}},
			line: 4, exitCode: 127,
		},
		"a marker without its newline is output": {
			out:  "##docs-block 3\nprintf '##docs-block 9'",
			want: []Piece{{Line: 3, Output: "printf '##docs-block 9'"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, line, code := Split(tc.out)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pieces (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff([2]int{tc.line, tc.exitCode}, [2]int{line, code}); diff != "" {
				t.Errorf("failing line and code (-want,+got):\n%s", diff)
			}
		})
	}
}
