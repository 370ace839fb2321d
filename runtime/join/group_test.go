package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLookupGroup(t *testing.T) {
	tests := map[string]struct {
		spec    string
		want    int
		wantErr string
	}{
		"a name":         {spec: "root", want: 0},
		"a numeric gid":  {spec: "4242", want: 4242},
		"an unknown one": {spec: "unitlet-no-such-group", want: -1, wantErr: "pass --socket-group=<gid>"},
		"none":           {spec: "", want: -1, wantErr: "no socket group"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := LookupGroup(tc.spec)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("LookupGroup(%q) = %d, %v; want %d, error with %q", tc.spec, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// Prepare creates a missing socket group with the node's groupadd (a
// stand-in here: this machine's group database is not the test's) and
// leaves a known group or a gid alone.
func TestPrepareCreatesTheSocketGroup(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "groupadd")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" >>"+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "groupadd-fails")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'groupadd: cannot lock /etc/group' >&2\nexit 10\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := groupadd
	t.Cleanup(func() { groupadd = saved })

	groupadd = fake
	for _, spec := range []string{"root", "4242", "unitlet-no-such-group"} {
		if err := ensureGroup(spec); err != nil {
			t.Errorf("ensureGroup(%q): %v", spec, err)
		}
	}
	b, _ := os.ReadFile(calls)
	if diff := cmp.Diff("--system unitlet-no-such-group\n", string(b)); diff != "" {
		t.Errorf("groupadd calls (-want,+got):\n%s", diff)
	}

	groupadd = failing
	if err := ensureGroup("unitlet-no-such-group"); err == nil || !strings.Contains(err.Error(), "cannot lock /etc/group") {
		t.Errorf("a failing groupadd: %v, want its message", err)
	}
	groupadd = filepath.Join(dir, "absent")
	if err := ensureGroup("unitlet-no-such-group"); err == nil || !strings.Contains(err.Error(), "--socket-group=<gid>") {
		t.Errorf("no groupadd: %v, want the fix named", err)
	}
}
