// Package terminal is a TTY run's terminal, both ends of its hand-off.
//
// The terminal is made by the trampoline inside the run's sandbox, not by
// the agent: the sandbox has a /dev/pts of its own (a new devpts
// instance), and a terminal from the node's /dev/pts would be invisible
// there (no ttyname, no /dev/pts/N to reopen). So, as runc does with
// --console-socket, the trampoline opens the pair in its own /dev/pts,
// keeps the follower end as the command's stdin, stdout and stderr
// (owned by the run's identity), and sends the controlling end to the
// agent over a unix socket (SCM_RIGHTS). The agent then holds the only
// copy of it: it copies bytes both ways and sets the size on it, which
// the kernel signals (SIGWINCH) to the command's foreground process group
// itself. No resize has to travel into the unit.
//
// The wire on the socket: the trampoline sends one byte with the fd; the
// agent sets the first size and answers one byte, after which the
// trampoline goes on to exec the command (which so sees its size from
// the start).
package terminal

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Size is a terminal's size in characters.
type Size struct {
	Rows, Cols uint16
}

// handOff and ready are the bytes sent with the fd and the answer.
const (
	handOff = 'T'
	ready   = 'R'
)

// Dial connects to the agent's terminal socket at path (close-on-exec).
// The trampoline dials while it is still root and before its sandbox:
// the socket is the agent's, mode 0600.
func Dial(path string) (int, error) {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("connect %s: %w", path, err)
	}
	return s, nil
}

// Open makes a terminal pair in this mount namespace's /dev/pts and
// gives the follower end to uid and gid (as login does). Both fds are
// close-on-exec; neither is anyone's controlling terminal yet.
func Open(uid, gid int) (controller, follower int, err error) {
	controller, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(what string, err error) (int, int, error) {
		unix.Close(controller)
		return -1, -1, fmt.Errorf("terminal: %s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(controller, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock", err)
	}
	// The follower through the controller itself (not by its name): the
	// one of this devpts instance, whatever path lookups would find.
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(controller), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fail("open the follower end", errno)
	}
	follower = int(fd)
	if err := unix.Fchown(follower, uid, gid); err != nil {
		unix.Close(follower)
		return fail("own the follower end", err)
	}
	return controller, follower, nil
}

// Hand sends controller to the agent over conn and waits for its answer:
// once Hand returns, the agent holds it and has set its first size.
func Hand(conn, controller int) error {
	if err := unix.Sendmsg(conn, []byte{handOff}, unix.UnixRights(controller), nil, 0); err != nil {
		return fmt.Errorf("hand the terminal over: %w", err)
	}
	var b [1]byte
	for {
		n, err := unix.Read(conn, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the agent to take the terminal: %w", err)
		}
		if n != 1 || b[0] != ready {
			return errors.New("the agent did not take the terminal")
		}
		return nil
	}
}

// TakeControl makes the terminal on fd the calling process's controlling
// terminal, in a session of its own: setsid, unless the process leads its
// session already (systemd starts every service so), then TIOCSCTTY.
func TakeControl(fd int) error {
	if _, err := unix.Setsid(); err != nil && unix.Getpid() != sid() {
		return fmt.Errorf("new session: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TIOCSCTTY, 0); err != nil {
		return fmt.Errorf("controlling terminal: %w", err)
	}
	return nil
}

func sid() int {
	s, _ := unix.Getsid(0)
	return s
}

// setSize sets the size of the terminal whose controller is fd.
func setSize(fd int, s Size) error {
	return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
}
