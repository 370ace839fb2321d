// Package cgrouphold places a process in a unit's cgroup that the agent
// cannot kill (frozen in a v1 freezer cgroup of the test's own), so a kill
// stays unproven until the test releases it. It needs this machine's
// hybrid hierarchies: the agent must not own the freezer cgroup.
package cgrouphold

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CgroupMount is where this machine mounts its cgroup hierarchies, one
// directory each (v1 controllers, the named systemd one, unified).
const CgroupMount = "/sys/fs/cgroup"

// Hold is a process the agent cannot kill: /bin/sleep placed in a unit's
// cgroup in every hierarchy but freezer, and frozen in a v1 freezer cgroup
// of the test's own. A v1-frozen task takes SIGKILL only when thawed, and
// the agent thaws nothing but its own freezer cgroups, so every look the
// agent takes sees the cgroup populated until release.
//
// Re-adding fresh processes in a loop would not do: the agent kills and
// looks again every ≤ 2 ms for 30 s, and one look at an empty cgroup
// between two additions proves the kill.
type Hold struct {
	// PID is the held process.
	PID     int
	freezer string
	done    chan struct{}
}

// In starts the process in cgroup (relative to each hierarchy) and
// checks the kernel placed it; it is killed and reaped at cleanup.
func In(t testing.TB, cgroup, tag string) *Hold {
	t.Helper()
	h := &Hold{freezer: filepath.Join(CgroupMount, "freezer", "unitlet-hold-"+tag), done: make(chan struct{})}
	if err := os.Mkdir(h.freezer, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.Remove(h.freezer)
		t.Fatal(err)
	}
	h.PID = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(h.done) }() // reaped at once: no zombie
	t.Cleanup(func() { h.end(t) })

	into := map[string]string{"freezer": h.freezer}
	entries, err := os.ReadDir(CgroupMount)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		dir := filepath.Join(CgroupMount, e.Name(), cgroup)
		if e.Name() == "freezer" {
			continue
		}
		if _, err := os.Stat(dir); err == nil {
			into[e.Name()] = dir
		}
	}
	if len(into) < 3 {
		t.Fatalf("%s exists in too few hierarchies: %v", cgroup, into)
	}
	for _, dir := range into {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(h.PID)), 0o644); err != nil {
			t.Fatalf("place %d in %s: %v", h.PID, dir, err)
		}
	}
	h.setFreezer(t, "FROZEN")
	// The kernel's word on where the process is, one line per hierarchy.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(h.PID) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	seen := procCgroups(string(b))
	for name, dir := range into {
		if want := strings.TrimPrefix(dir, filepath.Join(CgroupMount, name)); seen[name] != want {
			t.Fatalf("process %d in %s is in %q, want %q; /proc says:\n%s", h.PID, name, seen[name], want, b)
		}
	}
	return h
}

// procCgroups maps each hierarchy, named as its directory under
// CgroupMount, to the cgroup a /proc/<pid>/cgroup text puts the process in.
func procCgroups(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "":
			out["unified"] = parts[2]
		case strings.HasPrefix(parts[1], "name="):
			out[strings.TrimPrefix(parts[1], "name=")] = parts[2]
		default:
			for _, c := range strings.Split(parts[1], ",") {
				out[c] = parts[2]
			}
		}
	}
	return out
}

func (h *Hold) setFreezer(t testing.TB, state string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.freezer, "freezer.state"), []byte(state), 0o644); err != nil {
		t.Fatalf("freezer %s: %v", state, err)
	}
}

// Release thaws the process: a SIGKILL the agent sent is delivered now;
// else it is sent here. It waits until the process is reaped.
func (h *Hold) Release(t testing.TB) {
	t.Helper()
	h.setFreezer(t, "THAWED")
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill %d: %v", h.PID, err)
	}
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("held process %d did not exit after thaw and SIGKILL", h.PID)
	}
}

// end releases (again, harmless) and removes the freezer cgroup.
func (h *Hold) end(t testing.TB) {
	select {
	case <-h.done:
	default:
		h.Release(t)
	}
	if err := os.Remove(h.freezer); err != nil && !os.IsNotExist(err) {
		t.Errorf("remove %s: %v", h.freezer, err)
	}
}
