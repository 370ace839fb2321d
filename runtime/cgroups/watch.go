package cgroups

import (
	"context"
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

// watchEmpty closes the returned channel once rel is seen empty or gone
// (at once if it already is). It gives up silently when ctx ends; the
// caller selects on ctx too. Wake-ups come from inotify on cgroup.events
// where a cgroup2 hierarchy has one (the process's one shared instance),
// else from polling every poll; either way the verdict is the driver's
// own emptiness check. A notified watch has no timed look besides: the
// kernel notifies every change of populated, and a settled node's
// thousand watches must cost nothing.
func watchEmpty(ctx context.Context, d driver, rel string, poll time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	// Subscribed before the first look, so a change between the look and
	// the wait leaves its token.
	sub := subscribe(d.eventsFile(rel))
	go func() {
		defer sub.cancel()
		for {
			if pop, err := d.populated(rel); (err == nil && !pop) || !d.exists(rel) {
				close(ch)
				return
			}
			if sub == nil {
				sleep(ctx, poll)
			} else {
				select {
				case <-sub.C:
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return ch
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
