package cgroups

import (
	"errors"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifier is the one inotify instance every watch of this process
// shares. The kernel gives a user 128 instances by default (and the node's
// other daemons use some), far fewer than a node's generations, but
// watches by the hundred thousand: a watch per generation with an
// instance each fell back to polling past the 128th.
type notifier struct {
	f    *os.File // read through Go's poller: a waiting reader holds no thread
	mu   sync.Mutex
	subs map[int32]map[*subscription]struct{} // by watch descriptor
}

// subscription is one watch's interest in one file: fn runs, on the
// reader's goroutine, whenever the file changed. It must be short, and it
// may cancel its own subscription.
type subscription struct {
	fn func()
	n  *notifier
	wd int32
}

var shared = sync.OnceValue(func() *notifier {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	n := &notifier{f: os.NewFile(uintptr(fd), "inotify"), subs: map[int32]map[*subscription]struct{}{}}
	go n.read()
	return n
})

// subscribe calls fn whenever path is modified; nil when it cannot (no
// inotify, or path is gone), and the caller polls instead.
func subscribe(path string, fn func()) *subscription {
	n := shared()
	if n == nil || path == "" {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// Under mu: a concurrent cancel of the same file's last subscriber
	// cannot remove the watch between the add and the registration.
	wd, err := unix.InotifyAddWatch(int(n.f.Fd()), path, unix.IN_MODIFY)
	if err != nil {
		return nil
	}
	s := &subscription{fn: fn, n: n, wd: int32(wd)}
	if n.subs[s.wd] == nil {
		n.subs[s.wd] = map[*subscription]struct{}{}
	}
	n.subs[s.wd][s] = struct{}{}
	return s
}

// cancel ends the subscription; the file's watch goes with its last one.
func (s *subscription) cancel() {
	if s == nil {
		return
	}
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	subs, ok := n.subs[s.wd]
	if !ok {
		return // the kernel dropped the watch (the file is gone)
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(n.subs, s.wd)
		_, _ = unix.InotifyRmWatch(int(n.f.Fd()), uint32(s.wd))
	}
}

// read hands every event to its watch descriptor's subscribers for the
// life of the process.
func (n *notifier) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	var due []func()
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		due = due[:0]
		n.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			for s := range n.subs[ev.Wd] {
				due = append(due, s.fn)
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(n.subs, ev.Wd) // removed by the kernel: the file is gone
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		n.mu.Unlock()
		// Outside mu: a callback may cancel its subscription.
		for _, fn := range due {
			fn()
		}
		clear(due)
	}
}
