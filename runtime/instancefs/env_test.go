package instancefs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEnv(t *testing.T) {
	tests := map[string]struct {
		in       string
		want     map[string]string
		wantLine int // 0: no error
	}{
		"empty":              {"", map[string]string{}, 0},
		"pairs and comments": {"# c\nA=1\n\nB_2=x=y\r\nC=\n", map[string]string{"A": "1", "B_2": "x=y", "C": ""}, 0},
		"value kept literal": {"A= spaced \"q\" ", map[string]string{"A": ` spaced "q" `}, 0},
		"no equals":          {"A=1\nBROKEN\n", nil, 2},
		"bad key":            {"A=1\nB=2\n1X=3\n", nil, 3},
		"key with space":     {"MY KEY=1", nil, 1},
		"empty key":          {"=v", nil, 1},
		"duplicate":          {"A=1\nA=2", nil, 2},
		"nul in value":       {"A=x\x00y", nil, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseEnv([]byte(tc.in))
			if tc.wantLine != 0 {
				var le *EnvLineError
				if !errors.As(err, &le) || !errors.Is(err, ErrMalformedEnv) || le.Line != tc.wantLine {
					t.Fatalf("got %v, want a malformed-env error naming line %d", err, tc.wantLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestMalformedEnvFileNamesLine(t *testing.T) {
	dir := t.TempDir()
	if err := WriteAtomic(dir, "instance.env", []byte("A=1\nB=2\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadEnv(dir, "instance.env")
	var le *EnvLineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("got %v, want error naming line 3", err)
	}
}

func TestReadEnvMissingIsEmpty(t *testing.T) {
	got, err := ReadEnv(t.TempDir(), "instance.env")
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want empty env", got, err)
	}
}

func TestEnvRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{"UNITLET_ADMIN_TOKEN": "abc", "X": "a=b c", "EMPTY": ""}
	if err := WriteEnv(dir, "instance.env", want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEnv(dir, "instance.env")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
	if _, err := FormatEnv(map[string]string{"A": "line\nbreak"}); err == nil {
		t.Error("a value with a newline was formatted")
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{"", "A=1\n", "# c\nA=1\r\nB=x=y\n", "BROKEN", "A=1\nA=2", "=v", "A=\x00", "K=v\r\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		env, err := ParseEnv(in)
		if err != nil {
			if !errors.Is(err, ErrMalformedEnv) {
				t.Fatalf("error %v does not wrap ErrMalformedEnv", err)
			}
			return
		}
		out, err := FormatEnv(env)
		if err != nil {
			return // a value ending in CR cannot be written back; fine
		}
		again, err := ParseEnv(out)
		if err != nil {
			t.Fatalf("formatted env does not parse: %v", err)
		}
		if d := cmp.Diff(env, again); d != "" {
			t.Fatalf("round trip (-first,+second):\n%s", d)
		}
	})
}
