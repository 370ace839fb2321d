package cgroups

import (
	"context"
	"sync"
	"time"
)

// watchPoll is how often a watch looks where it has no notification
// (plain v1, no cgroup2 hierarchy beside it).
const watchPoll = 100 * time.Millisecond

func (m *instance) WatchEmpty(ctx context.Context, child string) (<-chan struct{}, error) {
	if err := checkChild(child); err != nil {
		return nil, err
	}
	return watchEmpty(ctx, m.d, m.rel(child), watchPoll), nil
}

func (m *instance) OnEmpty(ctx context.Context, child string, fn func()) error {
	if err := checkChild(child); err != nil {
		return err
	}
	onEmpty(ctx, m.d, m.rel(child), watchPoll, fn)
	return nil
}

// watchEmpty closes the returned channel once rel is seen empty or gone
// (at once if it already is); see onEmpty.
func watchEmpty(ctx context.Context, d driver, rel string, poll time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	onEmpty(ctx, d, rel, poll, func() { close(ch) })
	return ch
}

// onEmpty calls fn once rel is seen empty or gone (at once, before it
// returns, if it already is). It gives up silently when ctx ends. Wake-ups
// come from inotify on cgroup.events where a cgroup2 hierarchy has one
// (the process's one shared instance), else from polling every poll;
// either way the verdict is the driver's own emptiness check. A notified
// watch is a callback on the shared reader, with no goroutine and no
// timed look besides: the kernel notifies every change of populated, and
// a settled node's thousand watches must cost nothing.
func onEmpty(ctx context.Context, d driver, rel string, poll time.Duration, fn func()) {
	w := &emptyWatch{ctx: ctx, d: d, rel: rel, fn: fn}
	// Subscribed before the first look, so a change between the look and
	// the subscription is not missed.
	sub := subscribe(d.eventsFile(rel), func() { w.look() })
	if sub == nil {
		go w.poll(ctx, poll)
		return
	}
	w.mu.Lock()
	w.sub = sub
	ended := w.done // by a notification that came first
	w.mu.Unlock()
	if ended {
		sub.cancel()
		return
	}
	stop := context.AfterFunc(ctx, func() { w.end(false) })
	w.mu.Lock()
	w.stop = stop
	ended = w.done
	w.mu.Unlock()
	if ended {
		stop()
		return
	}
	w.look()
}

type emptyWatch struct {
	ctx context.Context
	d   driver
	rel string
	fn  func()
	sub *subscription

	mu   sync.Mutex
	done bool
	stop func() bool // the ctx hook's
}

// look ends the watch once rel is empty or gone, calling fn unless ctx
// has ended; it says whether it ended. The ctx check is here, not only in
// the ctx hook: the hook runs on its own goroutine, and a notification
// arriving just after the cancel must not beat it to fn.
func (w *emptyWatch) look() bool {
	if pop, err := w.d.populated(w.rel); (err == nil && !pop) || !w.d.exists(w.rel) {
		w.end(w.ctx.Err() == nil)
		return true
	}
	return false
}

// end ends the watch once: fn runs only when fired and not ended before.
func (w *emptyWatch) end(fired bool) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.done = true
	stop, sub := w.stop, w.sub
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	sub.cancel() // nil-safe; one not yet set is cancelled by onEmpty
	if fired {
		w.fn()
	}
}

// poll looks every poll until rel is empty or ctx ends.
func (w *emptyWatch) poll(ctx context.Context, poll time.Duration) {
	for {
		if w.look() {
			return
		}
		sleep(ctx, poll)
		if ctx.Err() != nil {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
