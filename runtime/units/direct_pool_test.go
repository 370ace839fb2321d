package units

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

// idlePids waits until b's pool holds warmShims idle shims and returns
// their pids.
func idlePids(t *testing.T, b *Direct) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.pool.mu.Lock()
		var pids []int
		for _, s := range b.pool.idle {
			pids = append(pids, s.pid)
		}
		b.pool.mu.Unlock()
		if len(pids) == warmShims {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d idle shims, want %d", len(pids), warmShims)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRunning starts generation n of name and kills it at the end.
func startRunning(t *testing.T, e *dEnv, b *Direct, name string, n int64) (layout.Slot, outcome.Start) {
	t.Helper()
	p := makeProc(t, e.lay, name, n, "/bin/sleep", "1000")
	got := b.Start(context.Background(), Spec{Slot: p})
	if got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { _ = b.Kill(context.Background(), p) })
	return p, got
}

// shimOf is the pid of the shim that started p, from its pid record.
func shimOf(t *testing.T, p layout.Slot) int {
	t.Helper()
	rs, err := readRecords(p)
	if err != nil {
		t.Fatal(err)
	}
	if rs.pid == nil {
		t.Fatalf("no pid record for %s", p.UnitName())
	}
	return rs.pid.ShimPID
}

func rootOnly(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: real cgroups")
	}
}

// A start after the first is run by a shim that was already idle.
func TestDirectStartTakesWarmShim(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	startRunning(t, e, b, "warm", 1)
	idle := idlePids(t, b)
	p, _ := startRunning(t, e, b, "warm", 2)
	if got := shimOf(t, p); got != idle[0] {
		t.Errorf("shim of the second start is %d, want the idle %d (idle: %v)", got, idle[0], idle)
	}
}

// Close ends idle shims, which exit without a job having done nothing:
// no records, no cgroup.
func TestDirectCloseEndsIdleShims(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	startRunning(t, e, b, "close", 1)
	idlePids(t, b)
	b.pool.mu.Lock()
	idle := slices.Clone(b.pool.idle)
	b.pool.mu.Unlock()
	b.Close()
	for _, s := range idle {
		select {
		case <-s.done:
			if ws := s.state; !ws.Exited() || ws.ExitStatus() != shim.ExitIdle {
				t.Errorf("idle shim %d ended %s, want exit %d", s.pid, describeWait(ws), shim.ExitIdle)
			}
		default:
			t.Errorf("idle shim %d still running after Close", s.pid)
		}
	}
	// A start after Close still works, on a shim of its own.
	startRunning(t, e, b, "close", 2)
	b.pool.mu.Lock()
	n := len(b.pool.idle)
	b.pool.mu.Unlock()
	if n != 0 {
		t.Errorf("%d idle shims after Close, want none", n)
	}
}

// A warm shim that died is not handed the job: a fresh one starts it.
func TestDirectDeadWarmShimFallsBack(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	startRunning(t, e, b, "dead", 1)
	idle := idlePids(t, b)
	b.pool.mu.Lock()
	first := b.pool.idle[0]
	b.pool.mu.Unlock()
	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The report pipe's write end closes with the process; the test
	// waits on the reaper so the job pipe is surely broken.
	<-first.done
	p, _ := startRunning(t, e, b, "dead", 2)
	got := shimOf(t, p)
	if got == first.pid {
		t.Errorf("the dead shim %d is named as the unit's shim", got)
	}
	if got == idle[1] {
		t.Errorf("the unit ran on the second idle shim %d, want a fresh one", got)
	}
}

// A job cut short (the agent died while writing) is never acted on.
func TestWarmShimIgnoresPartialJob(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	p := makeProc(t, e.lay, "partial", 1, "/bin/sleep", "1000")
	inst := p.Instance()
	if err := os.MkdirAll(inst.ExitDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	// Everything a whole job would need to run is there.
	m, err := b.Manager(inst)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureParent(cgroups.Tier{}); err != nil {
		t.Fatal(err)
	}
	child, err := m.CreateGeneration(1, cgroups.Tier{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := shim.Args{Namespace: inst.Namespace(), Name: inst.Name(), Child: child, CgroupRoot: e.lay.CgroupRoot,
		ExitDir: inst.ExitDir(), Prefix: p.ExitPrefix(), Invocation: "x", Exe: e.exe,
		Launch: filepath.Join(inst.PrivateDir(), p.LaunchFile())}.Job()
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.spawnShim(true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.report.Close()
	if _, err := s.job.Write(job[:len(job)-1]); err != nil {
		t.Fatal(err)
	}
	s.job.Close()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		// It took the job and runs it: stop it, the check below fails.
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
		<-s.done
	}
	if ws := s.state; !ws.Exited() || ws.ExitStatus() != shim.ExitIdle {
		t.Errorf("shim with a partial job ended %s, want exit %d", describeWait(ws), shim.ExitIdle)
	}
	if _, err := os.Stat(filepath.Join(inst.ExitDir(), record.Name(p, record.PidSuffix))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid record after a partial job: %v", err)
	}
}

// threadScheds is the scheduling of every thread of pid.
func threadScheds(t *testing.T, pid int) []shim.Sched {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []shim.Sched
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			t.Fatal(err)
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread ended
		}
		if err != nil {
			t.Fatalf("sched of %d/%d: %v", pid, tid, err)
		}
		out = append(out, shim.Sched{Policy: a.Policy, Nice: a.Nice, Priority: a.Priority})
	}
	return out
}

// An idle shim waits in IdleSched, so its start-up takes no CPU a start
// wants; the shim that takes a job, and the app it starts, run with the
// agent's scheduling.
func TestDirectWarmShimWaitsIdle(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	if !b.canLeaveIdle() {
		t.Fatal("root cannot leave SCHED_IDLE here")
	}
	startRunning(t, e, b, "sched", 1)
	idle := idlePids(t, b)
	for _, pid := range idle {
		for _, got := range threadScheds(t, pid) {
			// The policy only: the kernel sets no nice for SCHED_IDLE (a
			// niced agent's idle shim keeps its nice, which weighs
			// nothing there).
			if got.Policy != shim.IdleSched.Policy || got.Priority != shim.IdleSched.Priority {
				t.Errorf("idle shim %d has a thread in %v, want %v", pid, got, shim.IdleSched)
			}
		}
	}
	agent, err := shim.CurrentSched()
	if err != nil {
		t.Fatal(err)
	}
	p, got := startRunning(t, e, b, "sched", 2)
	if sh := shimOf(t, p); sh != idle[0] {
		t.Fatalf("start 2 ran under shim %d, want the idle %d", sh, idle[0])
	}
	for who, pid := range map[string]int{"shim": idle[0], "app": got.MainPID} {
		for _, s := range threadScheds(t, pid) {
			if s != agent {
				t.Errorf("%s %d has a thread in %v, want the agent's %v", who, pid, s, agent)
			}
		}
	}
}
