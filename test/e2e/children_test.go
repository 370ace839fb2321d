package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// proc is one process as /proc/<pid>/stat tells it; start (in clock
// ticks since boot) tells a pid reused apart.
type proc struct {
	pid, ppid int
	state     byte
	start     string
}

func readProc(pid int) (proc, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, err
	}
	// The command name sits in parentheses and may hold any byte.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return proc{}, fmt.Errorf("stat of %d: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("stat of %d: %q", pid, s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, err
	}
	// Fields after the name: state(3) ppid(4) ... starttime(22).
	return proc{pid: pid, ppid: ppid, state: f[0][0], start: f[19]}, nil
}

// idleChildren are the agent's children outside its cgroup root: the idle
// warm shims (a shim that runs a unit has moved into the unit's cgroup).
func (a *agent) idleChildren(t *testing.T) []proc {
	if a.Cmd == nil || a.Cmd.Process == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil || p.ppid != a.Cmd.Process.Pid {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || strings.Contains(string(cg), a.CgroupRoot) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// expectReaped fails for every process of idle that, once the agent has
// stopped, lingers: above all a zombie, which an agent that ended its
// idle shims itself would have reaped.
func expectReaped(t *testing.T, idle []proc) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range idle {
		for {
			now, err := readProc(p.pid)
			if err != nil || now.start != p.start {
				break // gone, or the pid is another process's now
			}
			if now.state == 'Z' {
				t.Errorf("idle shim %d outlived the agent unreaped (a zombie of %d)", p.pid, now.ppid)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("idle shim %d outlived the agent (state %c)", p.pid, now.state)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
