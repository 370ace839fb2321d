package trampoline

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// dialTerminal connects to the agent's terminal socket when lf asks for
// a terminal (-1 when it does not): now, as root and with the node's
// file system still in view; the terminal itself is made in the sandbox
// (makeTerminal).
func dialTerminal(lf launch.File) (int, error) {
	if lf.Terminal == nil {
		return -1, nil
	}
	conn, err := terminal.Dial(lf.Terminal.Socket)
	if err != nil {
		return -1, fmt.Errorf("terminal: %w", err)
	}
	return conn, nil
}

// makeTerminal opens the run's terminal in the sandbox's own /dev/pts
// (see runtime/terminal on why there), owned by the run's identity on the
// node, makes its follower end stdin, stdout and stderr, and hands the
// controller to the agent over conn. The streams wired before (wire)
// end here: they carried only what failed before the terminal was made.
// It is the caller's controlling terminal only from TakeControl on, in
// the process that execs the command.
func makeTerminal(conn int, lf launch.File) error {
	if conn < 0 {
		return nil
	}
	defer unix.Close(conn)
	uid, gid := lf.Identity.UID, lf.Identity.GID
	if m := lf.UserNamespace; m != nil {
		uid, gid = m.UID, m.GID // its root, on the node
	}
	ctl, fol, err := terminal.Open(uid, gid)
	if err != nil {
		return err
	}
	defer unix.Close(fol)
	err = terminal.Hand(conn, ctl)
	unix.Close(ctl) // the agent's copy is the only one
	if err != nil {
		return err
	}
	for fd := 0; fd <= 2; fd++ {
		if err := unix.Dup3(fol, fd, 0); err != nil {
			return fmt.Errorf("terminal: dup to fd %d: %w", fd, err)
		}
	}
	return nil
}
