package join

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadIdentity(t *testing.T) {
	id, err := ReadIdentity("", "")
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{
		MachineID: readTrimmed(t, "/etc/machine-id"),
		BootID:    readTrimmed(t, BootIDFile),
		Platform:  runtime.GOOS + "-" + runtime.GOARCH,
		Kernel:    strings.Fields(readTrimmed(t, "/proc/version"))[2],
	}
	if diff := cmp.Diff(want, id); diff != "" {
		t.Errorf("identity (-want,+got):\n%s", diff)
	}
}

// In a container the node's /etc is mounted elsewhere: the machine ID is
// the host's, not the image's (which has none). The boot ID is read where
// the agent was told to (--boot-id-file).
func TestReadIdentityBelowHostEtc(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/machine-id", []byte("0123456789abcdef0123456789abcdef\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	boot := dir + "/boot_id"
	if err := os.WriteFile(boot, []byte("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	id, err := ReadIdentity(dir, boot)
	if err != nil || id.MachineID != "0123456789abcdef0123456789abcdef" || id.BootID != "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0" {
		t.Fatalf("ReadIdentity(%s, %s) = %+v, %v", dir, boot, id, err)
	}
	if _, err := ReadIdentity(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "machine-id") {
		t.Errorf("no machine-id: %v, want it named", err)
	}
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
