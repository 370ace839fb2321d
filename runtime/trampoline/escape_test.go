package trampoline

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/escapeprobe/report"
	"github.com/unitlet/unitlet/runtime/launch"
)

// TestEscapeMatrix runs the escape probe through the trampoline as two
// tenants beside a third that left traces (SysV memory, a /dev/shm file,
// its argv): one with an identity of its own, one granted root. No row
// may escape. Before the Instance's world (world.go, seccomp.go) every
// row but kernel-log and kernel-modules escaped for one of them
// (docs/security.md).
func TestEscapeMatrix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the sandbox and the drop need root")
	}
	probe := buildProbe(t)
	marker := fmt.Sprintf("unitlet-escape-%d", os.Getpid())
	holder := startHolder(t, probe, marker, 1879048192+81)
	defer holder()
	own := 1879048192 + 82
	for name, userns := range map[string]*launch.IDMap{
		"own identity": nil,
		"granted root": {UID: own + 1, GID: own + 1},
	} {
		t.Run(name, func(t *testing.T) {
			id, owner := launch.Identity{UID: own, GID: own}, own
			if userns != nil {
				id, owner = launch.Identity{}, userns.UID
			}
			w := ownedDir(t, owner)
			out := filepath.Join(w, "escape.json")
			lf := writeLaunch(t, launch.File{
				Schema: launch.Schema, Argv: []string{probe, "probe"}, Identity: id, Writable: []string{w},
				Env: []string{"PROBE_MARKER=" + marker, "PROBE_OUT=" + out, "UNITLET_DATA_DIR=" + w}, UserNamespace: userns,
			})
			cmd := exec.Command(os.Args[0], "--launch", lf)
			cmd.Env = []string{asTrampoline + "=1"}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			rows, err := report.Read(out, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("escape matrix, %s:\n%s", name, report.Table(rows))
			for _, e := range report.Escapes(rows) {
				t.Error("escaped: " + e)
			}
			if len(rows) != report.Rows {
				t.Errorf("report has %d rows, want %d", len(rows), report.Rows)
			}
		})
	}
}

// buildProbe builds the probe below the package dir: not under /tmp,
// which the sandbox replaces with a private one.
func buildProbe(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", ".escapeprobe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	abs, _ := filepath.Abs(dir)
	if err := os.Chmod(abs, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(abs, "escapeprobe")
	build := exec.Command("go", "build", "-o", bin, "github.com/unitlet/unitlet/internal/testkit/escapeprobe")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v: %s", err, out)
	}
	return bin
}

// startHolder runs the tenant that leaves traces and returns its stop.
func startHolder(t *testing.T, probe, marker string, uid int) func() {
	t.Helper()
	lf := writeLaunch(t, launch.File{
		Schema: launch.Schema, Argv: []string{probe, "hold"}, Identity: launch.Identity{UID: uid, GID: uid},
		Env: []string{"PROBE_MARKER=" + marker},
	})
	cmd := exec.Command(os.Args[0], "--launch", lf)
	cmd.Env = []string{asTrampoline + "=1"}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "holding") {
		_ = cmd.Process.Kill()
		t.Fatalf("holder: %q", line)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}
