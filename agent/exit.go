package agent

import (
	"errors"
	"sync"
)

// atExit holds what run closes once the manager has stopped. Only then
// is no reconciler using the node runtime, and the agent is still alive
// to reap the processes a close ends (the idle warm shims): left to the
// kernel, they would be orphans of a PID 1 that may never reap them.
type atExit struct {
	mu  sync.Mutex
	fns []func() error
}

// add registers f; the last added runs first.
func (a *atExit) add(f func() error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fns = append(a.fns, f)
}

// run calls every registered function once, in reverse order, and joins
// their errors.
func (a *atExit) run() error {
	a.mu.Lock()
	fns := a.fns
	a.fns = nil
	a.mu.Unlock()
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		errs = append(errs, fns[i]())
	}
	return errors.Join(errs...)
}
