package selfinstall

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallReplacesARunningBinary(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "bin", "unitlet")
	if err := Install("/bin/sleep", dst); err != nil {
		t.Fatal(err)
	}
	// The installed copy runs while the next one is installed over it.
	run := exec.Command(dst, "5")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	if err := Install("/bin/true", dst); err != nil {
		t.Fatalf("install over a running binary: %v", err)
	}
	if err := exec.Command(dst).Run(); err != nil {
		t.Fatalf("the new copy: %v", err)
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed mode %v, %v", fi.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "bin", "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, "bin", ".*"))
	if len(left) != 1 || len(hidden) != 0 {
		t.Errorf("files beside the binary: %v %v, want none", left, hidden)
	}
}

func TestInstallRefusesARelativePath(t *testing.T) {
	if err := Install("/bin/true", "bin/unitlet"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative --to: %v", err)
	}
}
