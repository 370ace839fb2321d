package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Terminal is the user's side of a terminal the plugin runs on: what it
// shows, and its size.
type Terminal struct {
	controller *os.File
	out        SyncBuffer
}

// Output is what the terminal showed so far.
func (tm *Terminal) Output() string { return tm.out.String() }

// Resize sets the terminal's size; the kernel signals SIGWINCH to the
// plugin, the terminal's foreground process.
func (tm *Terminal) Resize(t *testing.T, cols, rows uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(tm.controller.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		t.Fatal(err)
	}
}

// StartPluginOnTerminal starts bin/kubectl-unitlet with a new terminal of
// cols x rows as its controlling terminal and stdin, stdout and stderr,
// as a user's shell would.
func StartPluginOnTerminal(t *testing.T, kubeconfig string, cols, rows uint16, args ...string) (*PluginRun, *Terminal) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	tm := &Terminal{controller: ctl}
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	fol, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fol.Close() // the plugin's copies are the ones that count
	tm.Resize(t, cols, rows)
	p := &PluginRun{Cmd: exec.Command(PluginBinary(), args...), done: make(chan struct{})}
	p.Cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = fol, fol, fol
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ctl.Read(buf)
			_, _ = tm.out.Write(buf[:n])
			if err != nil {
				return // EIO once the plugin let go of it
			}
		}
	}()
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	})
	return p, tm
}
