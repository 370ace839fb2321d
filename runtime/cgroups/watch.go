package cgroups

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watchPoll is how often a watch looks where it has no notification
// (plain v1, no cgroup2 hierarchy beside it).
const watchPoll = 100 * time.Millisecond

// watchQuiet is how often a notified watch looks anyway: a safety net,
// not the way it learns (inotify on cgroup.events does), so that an idle
// node's watches cost no wake-ups worth counting.
const watchQuiet = 10 * time.Second

func (m *instance) WatchEmpty(ctx context.Context, child string) (<-chan struct{}, error) {
	if err := checkChild(child); err != nil {
		return nil, err
	}
	return watchEmpty(ctx, m.d, m.rel(child), watchPoll), nil
}

// watchEmpty closes the returned channel once rel is seen empty or gone
// (at once if it already is). It gives up silently when ctx ends; the
// caller selects on ctx too. Wake-ups come from inotify on cgroup.events
// where a cgroup2 hierarchy has one (read through Go's poller: a waiting
// watch holds no thread and wakes for nothing), else from polling every
// poll; either way the verdict is the driver's own emptiness check.
func watchEmpty(ctx context.Context, d driver, rel string, poll time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	events := openEvents(d.eventsFile(rel))
	go func() {
		if events != nil {
			defer events.Close()
			// Ending ctx ends a read in progress.
			stop := context.AfterFunc(ctx, func() { _ = events.SetReadDeadline(time.Unix(1, 0)) })
			defer stop()
		}
		buf := make([]byte, 4096)
		for {
			if pop, err := d.populated(rel); (err == nil && !pop) || !d.exists(rel) {
				close(ch)
				return
			}
			if ctx.Err() != nil {
				return
			}
			if events == nil {
				sleep(ctx, poll)
				continue
			}
			// Any event, the quiet limit, or ctx: look again.
			_ = events.SetReadDeadline(time.Now().Add(watchQuiet))
			if _, err := events.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				sleep(ctx, poll) // the notification broke: poll from now on
			}
		}
	}()
	return ch
}

// openEvents is a non-blocking inotify descriptor watching path for
// modification, as a file Go's poller waits on; nil when there is none.
func openEvents(path string) *os.File {
	if path == "" {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "inotify:"+path)
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close() // not pollable: a read could not be ended; poll instead
		return nil
	}
	return f
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
