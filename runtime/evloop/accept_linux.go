package evloop

import (
	"fmt"
	"net"
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

// acceptCloexec takes one queued connection, close-on-exec from the
// start: a process started meanwhile must not inherit it.
func acceptCloexec(fd int) (int, error) {
	nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
	return nfd, err
}
