package cgroups

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/layout"
)

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: these tests create real cgroups")
	}
}

// testConfig is a Config with a cgroup root of this test's own, removed
// (with everything in it killed) when the test ends, also on failure.
func testConfig(t testing.TB) Config {
	t.Helper()
	needRoot(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	root := testPrefix + hex.EncodeToString(b)
	cfg := Config{Root: root}
	if tt, ok := t.(*testing.T); ok {
		cfg.Log = testr.New(tt)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		proofs, err := SweepStale(ctx, Config{MountRoot: cfg.MountRoot, Root: "."}, root, nil)
		if err != nil {
			t.Errorf("cleanup of %s: %v", root, err)
		}
		for _, p := range proofs {
			if !p.Proven {
				t.Errorf("cleanup of %s: %v", root, p.Error())
			}
		}
	})
	return cfg
}

// newManager opens instance ns/name under cfg with its parent at tier.
func newManager(t testing.TB, cfg Config, name string, tier Tier) Manager {
	t.Helper()
	m, err := New(cfg, "ns", name)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := m.EnsureParent(tier); err != nil {
		t.Fatalf("EnsureParent: %v", err)
	}
	return m
}

// held is a shell that waits for one line on stdin before it runs script,
// so it can be placed before it does anything.
type held struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startHeld(t testing.TB, script string) *held {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read go; "+script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &held{cmd: cmd, stdin: in}
	// Children inherit the shell's descriptors; without a delay Wait
	// would block on a pipe they keep open.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

func (h *held) pid() int { return h.cmd.Process.Pid }

func (h *held) release(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// treeScript forks a tree: 10 subshells with 9 sleeps each; with the top
// shell that is 101 processes.
const treeScript = `for i in 1 2 3 4 5 6 7 8 9 10; do (for j in 1 2 3 4 5 6 7 8 9; do sleep 1000 & done; wait) & done; wait`

// spawnIn starts a held shell, places it in child, lets it run script and
// waits until child holds want processes.
func spawnIn(t testing.TB, m Manager, child, script string, want int) *held {
	t.Helper()
	h := startHeld(t, script)
	if err := m.Place(h.pid(), child); err != nil {
		t.Fatalf("Place(%d, %s): %v", h.pid(), child, err)
	}
	h.release(t)
	waitFor(t, fmt.Sprintf("%d processes in %s", want, child), func() bool {
		pids, err := m.Pids(child)
		return err == nil && len(pids) == want
	})
	return h
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func alive(pid int) bool {
	if unix.Kill(pid, 0) != nil {
		return false
	}
	// A zombie still answers kill(0); it is not running.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// procCgroups reads /proc/<pid>/cgroup as hierarchy -> path, keyed by the
// controller list ("memory", "name=systemd", "" for cgroup2).
func procCgroups(t testing.TB, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

func readFile(t testing.TB, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func itoa(i int) string { return fmt.Sprint(i) }

// seedChild and sidecarChild are the role children layout names.
func seedChild(t testing.TB) string {
	t.Helper()
	c, err := layout.RoleCgroup(layout.RoleSeed)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sidecarChild(t testing.TB, name string) string {
	t.Helper()
	c, err := layout.SidecarCgroup(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
