// Package evloop waits on many file descriptors with one goroutine: a
// descriptor registered here costs an entry in one epoll set, not a
// parked goroutine and its stack. A node's thousand generations each wait
// on a few descriptors that rarely turn ready (a shim's pidfd, the log
// socket and pipe, the control socket); one goroutine each held ~17 MiB
// of stacks at 1,000 Instances.
//
// A registration is one-shot: its callback runs once the descriptor is
// readable (or hung up, or in error), on the loop's goroutine, and again
// only after Rearm. Callbacks must be short and must not block: work that
// may wait (a disk write) belongs in a goroutine the callback starts.
package evloop

import (
	"errors"
	"sync"
)

// ErrUnsupported: no event loop on this platform; callers wait in a
// goroutine of their own instead.
var ErrUnsupported = errors.New("evloop: not supported on this platform")

// Reg is one descriptor's registration.
type Reg struct {
	l  *Loop
	fd int
	id uint64
	fn func(*Reg)

	mu   sync.Mutex
	gone bool
	busy sync.WaitGroup // a callback in progress
}

// shared is the process's loop, started on first use.
var shared = sync.OnceValues(New)

// Shared is the process's one loop.
func Shared() (*Loop, error) { return shared() }

// dispatch runs r's callback unless r was stopped meanwhile.
func (r *Reg) dispatch() {
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return
	}
	r.busy.Add(1)
	r.mu.Unlock()
	defer r.busy.Done()
	r.fn(r)
}

// Stop ends the registration without waiting for a callback in
// progress: for the callback itself, which cannot wait for its own end.
// The descriptor stays open: it is the caller's to close.
func (r *Reg) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gone {
		r.gone = true
		r.l.remove(r)
	}
}

// Remove ends the registration: once it returns no callback runs, nor
// will. Not from the callback (Stop is for that).
func (r *Reg) Remove() {
	r.Stop()
	r.busy.Wait()
}

// Rearm asks for one more callback once the descriptor is readable (at
// once if it is now). Nothing once the registration ended.
func (r *Reg) Rearm() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return nil
	}
	return r.l.rearm(r)
}
