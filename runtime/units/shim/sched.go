package shim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sched is a thread's scheduling as sched_setattr(2) takes it. Linux
// keeps it per thread, and a new thread or a forked child starts with
// that of the thread that made it.
type Sched struct {
	Policy   uint32 `json:"policy"`
	Nice     int32  `json:"nice"`
	Priority uint32 `json:"priority"`
}

// IdleSched is a warm shim's while it waits: its start-up (the binary's
// package init, tens of milliseconds of CPU) then takes only CPU that no
// other work wants, and the kernel treats a CPU busy with it as idle when
// it places a waking thread. A shim given a job returns to the job's
// Sched (the agent's) before it runs anything.
var IdleSched = Sched{Policy: unix.SCHED_IDLE}

// String renders s as its flag value, policy/nice/priority.
func (s Sched) String() string { return fmt.Sprintf("%d/%d/%d", s.Policy, s.Nice, s.Priority) }

// ParseSched reads a Sched from its flag value.
func ParseSched(v string) (Sched, error) {
	f := strings.Split(v, "/")
	if len(f) != 3 {
		return Sched{}, fmt.Errorf("sched %q: want policy/nice/priority", v)
	}
	policy, err1 := strconv.ParseUint(f[0], 10, 32)
	nice, err2 := strconv.ParseInt(f[1], 10, 32)
	prio, err3 := strconv.ParseUint(f[2], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Sched{}, fmt.Errorf("sched %q: %w", v, err)
	}
	if nice < -20 || nice > 19 {
		return Sched{}, fmt.Errorf("sched %q: nice must be in -20..19", v)
	}
	return Sched{Policy: uint32(policy), Nice: int32(nice), Priority: uint32(prio)}, nil
}

// CurrentSched is the calling thread's scheduling.
func CurrentSched() (Sched, error) { return threadSched(0) }

func threadSched(tid int) (Sched, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return Sched{}, err
	}
	return Sched{Policy: a.Policy, Nice: a.Nice, Priority: a.Priority}, nil
}

func setThread(tid int, s Sched) error {
	return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: s.Policy, Nice: s.Nice, Priority: s.Priority}, 0)
}

// onOwnThread runs f on a fresh OS thread that dies with it, so the
// scheduling f gives that thread never reaches another goroutine.
func onOwnThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// No UnlockOSThread: the runtime ends the thread with this
		// goroutine.
		runtime.LockOSThread()
		errc <- f()
	}()
	return <-errc
}

// StartWith starts cmd with scheduling s: it forks from a thread of its
// own set to s, so every thread of the child starts with it and the
// caller's threads keep theirs.
func StartWith(cmd *exec.Cmd, s Sched) error {
	return onOwnThread(func() error {
		if err := setThread(0, s); err != nil {
			return fmt.Errorf("sched %v: %w", s, err)
		}
		return cmd.Start()
	})
}

// CanLeaveIdle reports whether a thread of this process may go from
// IdleSched back to the caller's scheduling (it needs CAP_SYS_NICE or a
// generous RLIMIT_NICE). A shim started idle must be able to, or its app
// would run idle.
func CanLeaveIdle() bool {
	return onOwnThread(func() error {
		s, err := CurrentSched()
		if err != nil {
			return err
		}
		if err := setThread(0, IdleSched); err != nil {
			return err
		}
		return setThread(0, s)
	}) == nil
}

// Apply gives every thread of process pid scheduling s. The agent gives a
// warm shim the job's before it hands the job over, so the shim wakes to
// it at full weight.
func Apply(pid int, s Sched) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended meanwhile is no matter.
		if err := setThread(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}

// applyAll gives every thread of this process s and locks the calling
// goroutine to its thread, which is then certain to have it: the
// trampoline forked from that thread inherits it.
func applyAll(s Sched) error {
	runtime.LockOSThread()
	if err := Apply(os.Getpid(), s); err != nil {
		return err
	}
	if err := setThread(0, s); err != nil {
		return err
	}
	if got, err := CurrentSched(); err != nil || got != s {
		return fmt.Errorf("sched is %v, want %v (%v)", got, s, err)
	}
	return nil
}
