package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// module writes a module example.com/m into a temporary directory: files
// maps a package directory to the module packages it imports (a name
// with a dot and no "./" is imported as it is, e.g. "net/http").
func module(t *testing.T, imports map[string][]string, rules string) (dir, rulesPath string) {
	t.Helper()
	dir = t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.22\n")
	for pkg, imps := range imports {
		var b strings.Builder
		b.WriteString("package " + filepath.Base(pkg) + "\n\nimport (\n")
		for _, imp := range imps {
			if strings.HasPrefix(imp, "./") {
				imp = "example.com/m/" + strings.TrimPrefix(imp, "./")
			}
			b.WriteString("\t_ \"" + imp + "\"\n")
		}
		b.WriteString(")\n")
		if len(imps) == 0 {
			b.Reset()
			b.WriteString("package " + filepath.Base(pkg) + "\n")
		}
		write(t, filepath.Join(dir, pkg, "x.go"), b.String())
	}
	rulesPath = filepath.Join(dir, "rules.yaml")
	write(t, rulesPath, rules)
	return dir, rulesPath
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const sideRule = `rules:
  - name: no-side
    why: the room stays off the side
    packages: [./room]
    forbidden: [./side]
`

func TestCheck(t *testing.T) {
	tests := map[string]struct {
		imports map[string][]string
		rules   string
		// want are the violations' chains, module-relative.
		want     [][]string
		wantCode int
	}{
		"a clean room passes": {
			imports: map[string][]string{"room/a": {"./lib"}, "lib": {"fmt"}, "side": nil},
			rules:   sideRule,
		},
		"a forbidden import fails, naming the importer": {
			imports:  map[string][]string{"room/a": {"./side"}, "side": nil},
			rules:    sideRule,
			want:     [][]string{{"room/a", "side"}},
			wantCode: 1,
		},
		"one reached through other packages fails with its shortest chain": {
			imports:  map[string][]string{"room/a": {"./room/b"}, "room/b": {"./lib"}, "lib": {"./side/deep"}, "side/deep": nil},
			rules:    sideRule,
			want:     [][]string{{"room/b", "lib", "side/deep"}},
			wantCode: 1,
		},
		"a longer allowed prefix wins over a forbidden one": {
			imports: map[string][]string{"room/a": {"./side/ok", "./room/b"}, "room/b": nil, "side/ok": nil, "side/bad": nil},
			rules: `rules:
  - {name: only-own, why: w, packages: [./room], forbidden: [.], allowed: [./room, ./side/ok]}
`,
		},
		"a package outside the module is matched by its path": {
			imports: map[string][]string{"room/a": {"net/http"}},
			rules: `rules:
  - {name: no-net, why: w, packages: [./room], forbidden: [net]}
`,
			want:     [][]string{{"room/a", "net/http"}},
			wantCode: 1,
		},
		"a room that names no package is an error": {
			imports: map[string][]string{"room/a": nil, "side": nil},
			rules: `rules:
  - {name: moved, why: w, packages: [./gone], forbidden: [./side]}
`,
			wantCode: 2,
		},
		"a forbidden module path that names no package is an error": {
			imports:  map[string][]string{"room/a": nil},
			rules:    sideRule,
			wantCode: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, rules := module(t, tc.imports, tc.rules)
			if got := run(dir, rules); got != tc.wantCode {
				t.Fatalf("exit code %d, want %d", got, tc.wantCode)
			}
			if tc.wantCode == 2 {
				return
			}
			vs, err := checkModule(dir, rules)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, v := range vs {
				var c []string
				for _, p := range v.Chain {
					c = append(c, strings.TrimPrefix(p, "example.com/m/"))
				}
				got = append(got, c)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestViolationNamesImporterImportAndRule(t *testing.T) {
	v := Violation{Rule: Rule{Name: "runtime", Why: "no Kubernetes"}, Chain: []string{"m/runtime/a", "m/runtime/b", "k8s.io/api/core/v1"}}
	want := `m/runtime/a imports k8s.io/api/core/v1 through m/runtime/b, which rule "runtime" forbids: no Kubernetes`
	if diff := cmp.Diff(want, v.String()); diff != "" {
		t.Errorf("message (-want,+got):\n%s", diff)
	}
}

func TestReadRulesRefusesUnclearRules(t *testing.T) {
	tests := map[string]string{
		"unknown field":  "rules:\n  - {name: r, packages: [./a], forbiden: [./b]}\n",
		"no room":        "rules:\n  - {name: r, forbidden: [./b]}\n",
		"nothing denied": "rules:\n  - {name: r, packages: [./a]}\n",
		"no name":        "rules:\n  - {packages: [./a], forbidden: [./b]}\n",
		"trailing slash": "rules:\n  - {name: r, packages: [./a/], forbidden: [./b]}\n",
		"relative no ./": "rules:\n  - {name: r, packages: [../a], forbidden: [./b]}\n",
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			write(t, path, content)
			if _, err := readRules(path, "example.com/m"); err == nil {
				t.Error("readRules accepted it")
			}
		})
	}
}
