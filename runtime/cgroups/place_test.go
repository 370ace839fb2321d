package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// A placed process sits in the child in every hierarchy there is: each
// v1 controller, name=systemd and the unified one.
func TestPlaceEveryHierarchy(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "place", Tier{Pids: 64})
	g1, err := m.CreateGeneration(1, Tier{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	h := startHeld(t, "exec sleep 1000")
	if err := m.Place(h.pid(), g1); err != nil {
		t.Fatal(err)
	}
	want := "/" + path.Join(m.Parent(), g1)
	_, hier, _ := detect("")
	got := procCgroups(t, h.pid())
	for key, p := range got {
		if !placedIn(key, hier) {
			continue
		}
		if p != want {
			t.Errorf("hierarchy %q: process in %s, want %s", key, p, want)
		}
	}
	if len(got) < len(hier)-1 { // cpu and cpuacct may share a line
		t.Errorf("process in %d hierarchies, %d known", len(got), len(hier))
	}
	pids, err := m.Pids(g1)
	if err != nil || len(pids) != 1 || pids[0] != h.pid() {
		t.Errorf("Pids(g1) = %v, %v; want [%d]", pids, err, h.pid())
	}
}

func placedIn(key string, h hierarchies) bool {
	for _, s := range strings.Split(key, ",") {
		if _, ok := h[s]; ok {
			return true
		}
	}
	return false
}

func TestPlaceRefusals(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "refuse", Tier{})
	tests := map[string]struct {
		child string
		want  error
	}{
		"parent holds no process": {child: "", want: ErrNotAChild},
		"not a child name":        {child: "../x", want: ErrNotAChild},
		"generation 0":            {child: "g0", want: ErrNotAChild},
		"absent child":            {child: "g7", want: ErrNoChild},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := m.Place(os.Getpid(), tc.child); !errors.Is(err, tc.want) {
				t.Fatalf("Place(%q) = %v, want %v", tc.child, err, tc.want)
			}
		})
	}
}

// A shim places itself with os.Getpid() and only then execs: the program
// it runs starts inside the child.
func TestShimPlacesItselfBeforeExec(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "shim", Tier{})
	sidecar, err := m.CreateRole(sidecarChild(t, "side"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envShim+"="+strings.Join([]string{"", cfg.Root, "ns", "shim", sidecar}, "|"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	waitFor(t, "the shim to exec sleep", func() bool {
		exe, _ := os.Readlink("/proc/" + itoa(pid) + "/exe")
		return strings.HasSuffix(exe, "/sleep")
	})
	pids, err := m.Pids(sidecar)
	if err != nil || len(pids) != 1 || pids[0] != pid {
		t.Fatalf("Pids(%s) = %v, %v; want [%d]", sidecar, pids, err, pid)
	}
	if got, want := procCgroups(t, pid)["memory"], "/"+path.Join(m.Parent(), sidecar); got != want {
		t.Errorf("memory cgroup %s, want %s", got, want)
	}
}
