package evloop

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdRetry is how long a listener that ran out of descriptors (EMFILE)
// rests before it accepts again: re-armed at once, a level-triggered
// queue would spin the loop.
const fdRetry = 100 * time.Millisecond

// OnAccept calls fn, on the loop, with each connection ln has queued,
// whenever it has some. Remove the registration before closing ln.
func (l *Loop) OnAccept(ln syscall.Conn, fn func(net.Conn)) (*Reg, error) {
	rc, err := ln.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("evloop: listener: %w", err)
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return nil, fmt.Errorf("evloop: listener: %w", err)
	}
	return l.Add(fd, func(r *Reg) {
		if err := AcceptQueued(rc, fn); err != nil {
			time.AfterFunc(fdRetry, func() { _ = r.Rearm() })
			return
		}
		_ = r.Rearm()
	})
}

// AcceptQueued accepts, without waiting, every connection queued on the
// non-blocking listener rc and hands each to fn. An error is running out
// of descriptors: what is still queued stays for a later call.
func AcceptQueued(rc syscall.RawConn, fn func(net.Conn)) error {
	var fds []int
	var aerr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
			switch {
			case err == nil:
				fds = append(fds, nfd)
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
				aerr = err
				return
			default: // EAGAIN: the queue is empty; EBADF/EINVAL: closed
				return
			}
		}
	})
	for _, nfd := range fds {
		f := os.NewFile(uintptr(nfd), "conn")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			continue
		}
		fn(c)
	}
	if cerr != nil {
		return nil // the listener is closed: nothing more will come
	}
	return aerr
}
