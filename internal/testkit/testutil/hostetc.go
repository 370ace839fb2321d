package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// HostEtc is an /etc for another machine as far as an agent can tell (its
// --host-etc): this node's passwd and group, and machineID as its
// machine ID.
func HostEtc(t testing.TB, machineID string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"passwd", "group"} {
		b, err := os.ReadFile(filepath.Join("/etc", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "machine-id"), []byte(machineID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
