package evloop

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Loop is one epoll set and the goroutine that waits on it.
type Loop struct {
	epfd int
	mu   sync.Mutex
	regs map[uint64]*Reg
	next uint64
}

const events = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT

// New starts a loop. It lives as long as the process: a node has one
// (Shared); tests may start their own.
func New() (*Loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("evloop: epoll: %w", err)
	}
	l := &Loop{epfd: epfd, regs: map[uint64]*Reg{}}
	go l.run()
	return l, nil
}

// Add registers fd: fn runs once it is readable, hung up or in error.
// fd must stay open until the registration is removed.
func (l *Loop) Add(fd int, fn func(*Reg)) (*Reg, error) {
	l.mu.Lock()
	l.next++
	r := &Reg{l: l, fd: fd, id: l.next, fn: fn}
	l.regs[r.id] = r
	l.mu.Unlock()
	ev := r.event()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.mu.Lock()
		delete(l.regs, r.id)
		l.mu.Unlock()
		return nil, fmt.Errorf("evloop: add fd %d: %w", fd, err)
	}
	return r, nil
}

// event carries r's id, not its fd: an event read just before a
// descriptor was closed and its number reused finds no registration.
func (r *Reg) event() unix.EpollEvent {
	return unix.EpollEvent{Events: events, Fd: int32(uint32(r.id)), Pad: int32(uint32(r.id >> 32))}
}

func (l *Loop) rearm(r *Reg) error {
	ev := r.event()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, r.fd, &ev); err != nil {
		return fmt.Errorf("evloop: rearm fd %d: %w", r.fd, err)
	}
	return nil
}

func (l *Loop) remove(r *Reg) {
	// ENOENT/EBADF: the descriptor was closed already, which removed it.
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, r.fd, nil)
	l.mu.Lock()
	delete(l.regs, r.id)
	l.mu.Unlock()
}

func (l *Loop) run() {
	evs := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(l.epfd, evs, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			panic(fmt.Sprintf("evloop: epoll_wait: %v", err)) // a bad epfd: a bug, never the node's state
		}
		for _, ev := range evs[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			l.mu.Lock()
			r := l.regs[id]
			l.mu.Unlock()
			if r != nil {
				r.dispatch()
			}
		}
	}
}
