package version_test

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A built kubectl-unitlet prints the version stamped with -ldflags -X (as
// `make build VERSION=...` and `make release` stamp it) and, unstamped,
// the commit its toolchain recorded in it ("dev" when none was: a git
// worktree, whose .git is a file, or GOFLAGS=-buildvcs=false).
func TestBuiltBinaryVersion(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		ldflags string
		want    func(bin string) string
	}{
		"stamped": {
			ldflags: "-X github.com/unitlet/unitlet/internal/version.Version=v9.8.7-test",
			want:    func(string) string { return "v9.8.7-test\n" },
		},
		"unstamped": {want: func(bin string) string { return recordedRevision(t, bin) + "\n" }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "kubectl-unitlet")
			build := exec.Command("go", "build", "-buildvcs=auto", "-ldflags", tc.ldflags, "-o", bin, "./cmd/kubectl-unitlet")
			build.Dir, build.Stderr = root, os.Stderr
			if err := build.Run(); err != nil {
				t.Fatalf("go build: %v", err)
			}
			out, err := exec.Command(bin, "version").Output()
			if err != nil {
				t.Fatalf("%s version: %v", bin, err)
			}
			if diff := cmp.Diff(tc.want(bin), string(out)); diff != "" {
				t.Errorf("version output (-want,+got):\n%s", diff)
			}
		})
	}
}

// recordedRevision is what an unstamped bin should report, read from the
// build information the toolchain wrote into it.
func recordedRevision(t *testing.T, bin string) string {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	rev, dirty := "", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return rev + dirty
}
