package units

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/unitlet/unitlet/runtime/units/shim"
)

// warmShims is how many idle shims the direct backend keeps: a start
// takes one instead of paying the binary's start-up (issue 5).
const warmShims = 2

// idleWait bounds how long Close waits for an idle shim to see its job
// pipe end before it kills it (it holds no job: nothing to lose).
const idleWait = 5 * time.Second

// errHandOff: the job did not reach the shim whole; since a shim acts
// only on a whole job, provably nothing ran.
var errHandOff = errors.New("units: shim did not take its job")

// warmShim is a `unitlet shim --warm` waiting for its job: started
// exactly as a start's shim (own session, report pipe), it does nothing
// until the job pipe delivers a whole job.
type warmShim struct {
	pid     int
	lowPrio bool               // started in shim.IdleSched
	job     *os.File           // write end: the job, then close
	report  *os.File           // read end of the report pipe
	done    chan struct{}      // closed once the shim is reaped
	state   syscall.WaitStatus // how it ended, set before done closes
}

// shimPool holds the idle shims; it is filled once starts have been
// quiet for refillQuiet, never before the first start, so a Direct that
// starts nothing spawns nothing (direct_refill.go).
type shimPool struct {
	// leaveIdle: may a shim started idle leave IdleSched (probed once).
	leaveIdle sync.Once
	canLeave  bool

	// clock times the quiet period before a refill (a fake in tests).
	clock clock

	mu      sync.Mutex
	idle    []*warmShim
	busy    int         // starts handed off and not yet answered
	last    time.Time   // the last hand-off or answer
	drained bool        // a start of this burst found no idle shim
	timer   func() bool // stops the armed quiet timer; nil when none
	// timerGen names the armed timer, so one that fired as it was
	// stopped does not clear the next.
	timerGen int
	filling  bool
	closed   bool
	fills    sync.WaitGroup
	// spawned counts the shims the refill started (tests read it).
	spawned int
}

// spawnShim starts a warm shim detached from the agent; for the pool
// (idle), in shim.IdleSched when the shim can leave it again.
func (b *Direct) spawnShim(idle bool) (*warmShim, error) {
	rr, rw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	jr, jw, err := os.Pipe()
	if err != nil {
		rr.Close()
		rw.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: b.cfg.Exe, Args: []string{b.cfg.Exe, "shim", shim.WarmFlag},
		// One P: a shim waits and copies logs, and each P costs memory
		// beside every app (a 64-core node would give it 64).
		Env: []string{"GOMAXPROCS=1"}, Dir: "/", ExtraFiles: []*os.File{rw, jr}, // fds 3 and 4
		// A session of its own: no signal to the agent's group or
		// terminal reaches it, and it outlives the agent.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	lowPrio := idle && b.canLeaveIdle()
	if lowPrio {
		err = shim.StartWith(cmd, shim.IdleSched)
	} else {
		err = cmd.Start()
	}
	rw.Close()
	jr.Close()
	if err != nil {
		rr.Close()
		jw.Close()
		return nil, fmt.Errorf("units: start shim: %w", err)
	}
	// The shim is the agent's child until the agent dies: reap it.
	s := &warmShim{pid: cmd.Process.Pid, lowPrio: lowPrio, job: jw, report: rr, done: make(chan struct{})}
	onReaped(cmd.Process.Pid, func(ws syscall.WaitStatus, _ error) {
		s.state = ws // an error leaves a zero status: "exit 0", never a refusal
		cmd.Process.Release()
		close(s.done)
	})
	return s, nil
}

// give writes job to s and closes the job pipe. An error means the shim
// never saw a whole job (it acts only once the job's last byte, its
// newline, is in).
func (s *warmShim) give(job []byte) error {
	_, err := s.job.Write(job)
	// Once the bytes are in the pipe the shim may act on them, whatever
	// the close says: from here only its report tells.
	_ = s.job.Close()
	if err != nil {
		return fmt.Errorf("%w: shim %d: %w", errHandOff, s.pid, err)
	}
	return nil
}

// dismiss ends an idle shim that got no job: its pipe ends, it exits.
func (s *warmShim) dismiss() {
	s.job.Close()
	s.report.Close()
	select {
	case <-s.done:
	case <-time.After(idleWait):
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
		<-s.done
	}
}

// handOff gives job to an idle shim, or to a fresh one when none is idle
// or the idle one is gone. On error nothing was handed off: no shim got a
// whole job. The pool refills only once starts are quiet (refillAfter):
// a shim spawned meanwhile would take a core from the starts of the same
// burst.
func (b *Direct) handOff(job []byte, sched *shim.Sched) (*warmShim, error) {
	if s := b.pool.take(); s != nil {
		if s.lowPrio && sched != nil {
			// Out of IdleSched before it wakes: the shim would do it
			// itself, but only once it got a CPU nothing else wanted.
			if err := shim.Apply(s.pid, *sched); err != nil {
				b.cfg.Log.Info("warm shim still idle; it leaves IdleSched itself", "pid", s.pid, "err", err)
			}
		}
		err := s.give(job)
		if err == nil {
			return s, nil
		}
		s.report.Close()
		b.cfg.Log.Info("warm shim gone, starting a fresh one", "pid", s.pid, "err", err)
	}
	s, err := b.spawnShim(false)
	if err != nil {
		return nil, err
	}
	if err := s.give(job); err != nil {
		s.report.Close()
		return nil, err
	}
	return s, nil
}

func (b *Direct) canLeaveIdle() bool {
	b.pool.leaveIdle.Do(func() { b.pool.canLeave = shim.CanLeaveIdle() })
	return b.pool.canLeave
}

func (p *shimPool) take() *warmShim {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		p.drained = true
		return nil
	}
	s := p.idle[0]
	p.idle = p.idle[1:]
	return s
}

// Close ends the idle shims and keeps new ones from being made; starts
// after it spawn their shim on the spot. Units and their shims keep
// running. Safe to call more than once.
func (b *Direct) Close() {
	p := &b.pool
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer()
		p.timer = nil
	}
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, s := range idle {
		s.dismiss()
	}
	p.fills.Wait()
}
