package launch

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

func valid() File {
	return File{Schema: Schema, Host: "shop.example.com", Argv: []string{"/bin/app", "--x"}, Env: []string{"A=1", "B="}, WorkingDir: "/srv",
		Identity: Identity{UID: 1000, GID: 1000, Groups: []int{1000, 44}, User: "app"}, Writable: []string{"/var/lib/unitlet/instances/ns/web"},
		Terminal: &Terminal{Socket: "/run/unitlet/ns/web/logs/cmd.run-1.tty.sock"}}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := valid()
	if err := Write(dir, "launch.gen.1.json", want); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "launch.gen.1.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode(), err)
	}
	got, err := Read(dir, "launch.gen.1.json")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"A": "1", "B": ""}, got.EnvMap()); d != "" {
		t.Errorf("EnvMap (-want,+got):\n%s", d)
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := map[string]string{
		"unknown schema":    `{"schema":"unitlet.dev/launch/v0","argv":["/bin/true"]}`,
		"no schema":         `{"argv":["/bin/true"]}`,
		"empty argv":        `{"schema":"` + Schema + `","argv":[]}`,
		"relative argv0":    `{"schema":"` + Schema + `","argv":["true"]}`,
		"unknown field":     `{"schema":"` + Schema + `","argv":["/bin/true"],"privileged":true}`,
		"trailing data":     `{"schema":"` + Schema + `","argv":["/bin/true"]} {}`,
		"env without =":     `{"schema":"` + Schema + `","argv":["/bin/true"],"env":["A"]}`,
		"env empty key":     `{"schema":"` + Schema + `","argv":["/bin/true"],"env":["=x"]}`,
		"nul in argv":       `{"schema":"` + Schema + `","argv":["/bin/true","a\u0000b"]}`,
		"relative workdir":  `{"schema":"` + Schema + `","argv":["/bin/true"],"workingDir":"srv"}`,
		"a v1 file":         `{"schema":"unitlet.dev/launch/v1","argv":["/bin/true"],"user":"app"}`,
		"negative uid":      `{"schema":"` + Schema + `","argv":["/bin/true"],"identity":{"uid":-1,"gid":0}}`,
		"negative group":    `{"schema":"` + Schema + `","argv":["/bin/true"],"identity":{"uid":1,"gid":1,"groups":[-5]}}`,
		"relative writable": `{"schema":"` + Schema + `","argv":["/bin/true"],"writable":["data"]}`,
		"writable root":     `{"schema":"` + Schema + `","argv":["/bin/true"],"writable":["/"]}`,
		"unclean writable":  `{"schema":"` + Schema + `","argv":["/bin/true"],"writable":["/var/../etc"]}`,
		"relative terminal": `{"schema":"` + Schema + `","argv":["/bin/true"],"terminal":{"socket":"tty.sock"}}`,
		"not json":          `argv=/bin/true`,
		"array":             `[]`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(in)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestReadRefusesSymlinkedLaunchFile(t *testing.T) {
	outside := t.TempDir()
	planted, err := Encode(File{Schema: Schema, Argv: []string{"/bin/sh", "-c", "cat /etc/shadow"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "evil.json"), planted, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "evil.json"), filepath.Join(dir, "launch.gen.1.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir, "launch.gen.1.json"); !errors.Is(err, instancefs.ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	// Writing replaces the link; the file outside keeps its content.
	if err := Write(dir, "launch.gen.1.json", valid()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "evil.json")); !bytes.Equal(got, planted) {
		t.Fatal("file outside was written")
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(valid())
	f.Add(good)
	f.Add([]byte(`{"schema":"` + Schema + `","argv":["/bin/true"]}`))
	f.Add([]byte(`{"schema":"x","argv":[]}`))
	f.Add([]byte(`{"schema":"` + Schema + `","argv":["rel"],"env":["A"]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		lf, err := Decode(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(lf.Argv) == 0 || !filepath.IsAbs(lf.Argv[0]) {
			t.Fatalf("decoded an unusable argv %q", lf.Argv)
		}
		out, err := Encode(lf)
		if err != nil {
			t.Fatalf("decoded file does not encode: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("encoded file does not decode: %v", err)
		}
		if d := cmp.Diff(lf, again); d != "" {
			t.Fatalf("round trip (-first,+second):\n%s", d)
		}
	})
}

func TestWithMemoryEnv(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		content string // "" and no file: none named
		want    []string
		wantErr bool
	}{
		"none named":    {want: []string{"A=1"}},
		"entries added": {content: "K=v\nL=w=x\n", want: []string{"A=1", "K=v", "L=w=x"}},
		"not KEY=VALUE": {content: "nokey\n", wantErr: true},
		"empty key":     {content: "=v\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := File{Env: []string{"A=1"}}
			if tc.content != "" {
				f.MemoryEnv = filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
				if err := os.WriteFile(f.MemoryEnv, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := f.WithMemoryEnv()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				if d := cmp.Diff(tc.want, got.Env); d != "" {
					t.Errorf("env (-want,+got):\n%s", d)
				}
			}
		})
	}
	if err := WriteMemoryEnv(dir, "bad", []string{"K=two\nlines"}); err == nil {
		t.Error("an entry of two lines was written")
	}
}
