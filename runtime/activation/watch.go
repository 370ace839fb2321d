package activation

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Granularity is how often a socket that got a connection is watched
// again: a Watcher's "last connection" is exact to within it, at a cost
// of at most one wake-up per socket per Granularity however busy it is.
const Granularity = time.Second

// Watcher keeps, for each watched listening socket, when a connection
// last arrived (or waited) on it, with one epoll for all of them; one
// thread blocks in it.
type Watcher struct {
	epfd    int
	arrived func(key string) // called on each connection seen, ≤ once per Granularity per key

	mu    sync.Mutex
	byFD  map[int32]*watched
	byKey map[string]*watched
	done  chan struct{}
}

type watched struct {
	key   string
	f     *os.File // the Watcher's own dup
	last  time.Time
	armed bool
}

// NewWatcher starts a Watcher that calls arrived (from its own goroutine)
// when a connection reaches a watched socket.
func NewWatcher(arrived func(key string)) (*Watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("activation: epoll: %w", err)
	}
	w := &Watcher{epfd: epfd, arrived: arrived, byFD: map[int32]*watched{}, byKey: map[string]*watched{}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// Watch starts watching f (a dup of it) under key, its last connection
// taken to be since; a socket already watched under key is let go.
func (w *Watcher) Watch(key string, f *os.File, since time.Time) error {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("activation: dup: %w", err)
	}
	x := &watched{key: key, f: os.NewFile(uintptr(fd), key), last: since, armed: true}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unwatchLocked(key)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		x.f.Close()
		return fmt.Errorf("activation: watch %s: %w", key, err)
	}
	w.byFD[int32(fd)], w.byKey[key] = x, x
	return nil
}

// Unwatch lets key's socket go.
func (w *Watcher) Unwatch(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unwatchLocked(key)
}

func (w *Watcher) unwatchLocked(key string) {
	x := w.byKey[key]
	if x == nil {
		return
	}
	fd := int(x.f.Fd())
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	delete(w.byFD, int32(fd))
	delete(w.byKey, key)
	x.f.Close()
}

// Last is when a connection last arrived on key's socket (or when the
// watch began); false when key is not watched.
func (w *Watcher) Last(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.byKey[key]
	if x == nil {
		return time.Time{}, false
	}
	return x.last, true
}

// Close stops the Watcher and lets every socket go.
func (w *Watcher) Close() error {
	close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.byKey {
		w.unwatchLocked(k)
	}
	return nil
}

// loop waits for connections; a socket that fired is re-armed after
// Granularity (one-shot, so a busy socket costs one wake-up per period,
// and re-arming a socket whose queue still holds one fires it again).
func (w *Watcher) loop() {
	events := make([]unix.EpollEvent, 64)
	rearm := time.Now().Add(Granularity)
	for {
		select {
		case <-w.done:
			_ = unix.Close(w.epfd)
			return
		default:
		}
		n, err := unix.EpollWait(w.epfd, events, int(Granularity/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		now := time.Now()
		var fired []string
		w.mu.Lock()
		for _, ev := range events[:max(n, 0)] {
			if x := w.byFD[ev.Fd]; x != nil {
				x.last, x.armed = now, false
				fired = append(fired, x.key)
			}
		}
		if now.After(rearm) {
			for fd, x := range w.byFD {
				if !x.armed {
					ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: fd}
					x.armed = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev) == nil
				}
			}
			rearm = now.Add(Granularity)
		}
		w.mu.Unlock()
		for _, k := range fired {
			w.arrived(k)
		}
	}
}
