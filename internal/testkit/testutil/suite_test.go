package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPreflight(t *testing.T) {
	present := filepath.Join(t.TempDir(), "unitlet")
	if err := os.WriteFile(present, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(t.TempDir(), "unitlet")
	tests := map[string]struct {
		euid int
		exe  string
		want string // the path returned, or the error
	}{
		"root with the binary": {euid: 0, exe: present, want: present},
		"not root":             {euid: 1000, exe: present, want: "s: must run as root (it makes cgroups)"},
		"binary missing":       {euid: 0, exe: absent, want: "s: " + absent + " missing: run `make build` first"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			exe, err := preflight("s", "it makes cgroups", tc.euid, tc.exe)
			got := exe
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want,+got):\n%s", diff)
			}
		})
	}
}
