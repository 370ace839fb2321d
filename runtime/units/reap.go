package units

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// reapChild waits until pid, a child of this process, has ended, reaps it
// and returns how it ended. The wait is on the child's pidfd through Go's
// poller: a node's thousand shims, each the agent's child until the agent
// restarts, then hold a parked goroutine each and no OS thread (os/exec's
// Wait blocks one in waitid per child: a thousand threads).
func reapChild(pid int) (syscall.WaitStatus, error) {
	var ws unix.WaitStatus
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		// No pidfd (a kernel before 5.3): a thread waits.
		_, err := wait4(pid, &ws, 0)
		return syscall.WaitStatus(ws), err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		_, err := wait4(pid, &ws, 0)
		return syscall.WaitStatus(ws), err
	}
	var werr error
	// A pidfd turns readable once its process has ended; until then the
	// callback's false parks the goroutine on the poller.
	err = rc.Read(func(uintptr) bool {
		var wpid int
		wpid, werr = wait4(pid, &ws, unix.WNOHANG)
		return werr != nil || wpid == pid
	})
	return syscall.WaitStatus(ws), errors.Join(err, werr)
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
