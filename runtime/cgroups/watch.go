package cgroups

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// watchPoll is how often a watch looks without a notification: the
// only wake-up on v1, the fallback where inotify is missing or quiet.
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
// where a cgroup2 hierarchy has one, else from polling every poll; either
// way the verdict is the driver's own emptiness check.
func watchEmpty(ctx context.Context, d driver, rel string, poll time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	fd := -1
	if ev := d.eventsFile(rel); ev != "" {
		if f, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err == nil {
			if _, err := unix.InotifyAddWatch(f, ev, unix.IN_MODIFY); err == nil {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	go func() {
		if fd >= 0 {
			defer unix.Close(fd)
		}
		for {
			if pop, err := d.populated(rel); (err == nil && !pop) || !d.exists(rel) {
				close(ch)
				return
			}
			if ctx.Err() != nil {
				return
			}
			wait(ctx, fd, poll)
		}
	}()
	return ch
}

// wait blocks until fd reports an event, poll passes or ctx ends (seen
// within a 50 ms slice while blocked in poll(2)).
func wait(ctx context.Context, fd int, poll time.Duration) {
	if fd < 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return
	}
	deadline := time.Now().Add(poll)
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		ms := int(min(left, 50*time.Millisecond) / time.Millisecond)
		n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 1))
		if n > 0 {
			for {
				if k, err := unix.Read(fd, buf); k <= 0 || err != nil {
					break
				}
			}
			return
		}
	}
}
