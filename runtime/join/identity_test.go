package join

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadIdentity(t *testing.T) {
	id, err := ReadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{
		MachineID: readTrimmed(t, MachineIDFile),
		BootID:    readTrimmed(t, BootIDFile),
		Platform:  runtime.GOOS + "-" + runtime.GOARCH,
		Kernel:    strings.Fields(readTrimmed(t, "/proc/version"))[2],
	}
	if diff := cmp.Diff(want, id); diff != "" {
		t.Errorf("identity (-want,+got):\n%s", diff)
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
