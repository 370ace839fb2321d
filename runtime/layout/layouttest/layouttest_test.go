package layouttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
)

const testPrefix = "unitlet-test-layouttest-"

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: these tests create real cgroups")
	}
}

// TestNewRemovesWhatItMade runs a process in a cgroup below the roots of
// a subtest and checks that, once the subtest ended, the process is dead
// and the roots are gone.
func TestNewRemovesWhatItMade(t *testing.T) {
	needRoot(t)
	var run, cgroupDir string
	var cmd *exec.Cmd
	t.Run("inner", func(t *testing.T) {
		lay := New(t, testPrefix)
		run = lay.RunRoot
		cgroupDir = filepath.Join(cgroups.DefaultMountRoot, "memory", lay.CgroupRoot)
		for _, d := range []string{lay.StateRoot, lay.RunRoot} {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				t.Fatalf("root %s not made: %v", d, err)
			}
		}
		m, err := cgroups.New(cgroups.Config{Root: lay.CgroupRoot}, "ns", "app")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.EnsureParent(cgroups.Tier{MemoryBytes: 64 << 20, Pids: 8}); err != nil {
			t.Fatal(err)
		}
		child, err := m.CreateGeneration(1, cgroups.Tier{MemoryBytes: 64 << 20, Pids: 8})
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("/bin/sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := m.Place(cmd.Process.Pid, child); err != nil {
			_ = cmd.Process.Kill()
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("sleep ended with %v, want killed by the sweep", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process in the test's cgroup root outlived the test")
	}
	for _, d := range []string{run, cgroupDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after the test: %v", d, err)
		}
	}
}

func TestSweepOldLeavesFreshRunRoots(t *testing.T) {
	needRoot(t)
	prefix := testPrefix + "sweep-"
	old := filepath.Join(RunParent, prefix+"old")
	fresh := filepath.Join(RunParent, prefix+"fresh")
	for _, d := range []string{old, fresh} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	past := time.Now().Add(-2 * staleAfter)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	SweepOld(prefix)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("stale run root %s kept: %v", old, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh run root %s removed: %v", fresh, err)
	}
}
