package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// EscapeProbe builds the escape probe (internal/testkit/escapeprobe),
// static so the node VM runs it too, into bin/ (not /tmp, which every
// sandbox replaces with a private one) and returns its path.
func EscapeProbe(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "escapeprobe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./internal/testkit/escapeprobe")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the escape probe: %v: %s", err, out)
	}
	return bin
}

// EscapeApp makes an Instance's template run the probe in mode (hold or
// probe) with marker, Ready once it serves.
func EscapeApp(probe, mode, marker string) func(*v1.Instance) {
	return func(i *v1.Instance) {
		i.Spec.Template.Command = []string{probe, mode}
		i.Spec.Template.Args = nil
		i.Spec.Template.Env = []v1.EnvVar{{Name: "PROBE_MARKER", Value: marker}}
		ReadyOnGet(i)
	}
}
