package units

import (
	"errors"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/evloop"
)

// onReaped reaps pid, a child of this process, once it has ended and
// calls done with how it ended. The wait is the child's pidfd in the
// process's one event loop: a node's thousand shims, each the agent's
// child until the agent restarts, then hold neither an OS thread each
// (os/exec's Wait blocks one in waitid per child) nor a goroutine and
// its stack. Without a pidfd (a kernel before 5.3) a goroutine waits.
func onReaped(pid int, done func(syscall.WaitStatus, error)) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		go func() { done(waitBlocking(pid)) }()
		return
	}
	loop, err := evloop.Shared()
	if err == nil {
		// A pidfd turns readable once its process has ended.
		_, err = loop.Add(fd, func(r *evloop.Reg) {
			var ws unix.WaitStatus
			wpid, werr := wait4(pid, &ws, unix.WNOHANG)
			if werr == nil && wpid == 0 {
				_ = r.Rearm() // not ended after all
				return
			}
			r.Stop()
			unix.Close(fd)
			done(syscall.WaitStatus(ws), werr)
		})
	}
	if err != nil {
		unix.Close(fd)
		go func() { done(waitBlocking(pid)) }()
	}
}

// waitBlocking waits for pid in a blocking wait4 (a thread of its own).
func waitBlocking(pid int) (syscall.WaitStatus, error) {
	var ws unix.WaitStatus
	_, err := wait4(pid, &ws, 0)
	return syscall.WaitStatus(ws), err
}

// wait4 is unix.Wait4 retried on EINTR.
func wait4(pid int, ws *unix.WaitStatus, options int) (int, error) {
	for {
		wpid, err := unix.Wait4(pid, ws, options, nil)
		if !errors.Is(err, unix.EINTR) {
			return wpid, err
		}
	}
}

// describeWait says how a process ended, as os.ProcessState would.
func describeWait(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}
