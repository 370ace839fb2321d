package plugin

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/remotecommand"
)

// terminal is the user's side of a run on a terminal: stdin in raw mode
// while it runs, and the size of the terminal, again at each resize.
type terminal struct {
	tty bool
	in  *os.File
	out *os.File
}

// newTerminal decides whether a run is on a terminal: -t with -i and a
// terminal on stdin, as kubectl exec decides; otherwise it says why not.
func newTerminal(streams genericiooptions.IOStreams, stdin, tty bool) terminal {
	in, _ := streams.In.(*os.File)
	out, _ := streams.Out.(*os.File)
	ok, why := useTTY(stdin, tty, in != nil && term.IsTerminal(int(in.Fd())))
	if why != "" {
		fmt.Fprintln(streams.ErrOut, "unitlet: "+why)
	}
	return terminal{tty: ok, in: in, out: out}
}

// useTTY is the decision: whether the run gets a terminal, and a warning
// when -t is not honoured.
func useTTY(stdin, tty, stdinIsTerminal bool) (bool, string) {
	switch {
	case !tty:
		return false, ""
	case !stdin:
		return false, "-t needs -i (the terminal's keys are the command's stdin); running without a terminal"
	case !stdinIsTerminal:
		return false, "unable to use a TTY: stdin is not a terminal; running without one"
	}
	return true, ""
}

// safe runs fn with stdin in raw mode and the terminal's sizes, and puts
// the terminal back as it was, however fn ends.
func (t terminal) safe(ctx context.Context, fn func(remotecommand.TerminalSizeQueue) error) error {
	state, err := term.MakeRaw(int(t.in.Fd()))
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	defer func() { _ = term.Restore(int(t.in.Fd()), state) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return fn(t.monitorSize(ctx))
}

// sizeFile is the file whose terminal has the size: stdout's when it is
// one, else stdin's.
func (t terminal) sizeFile() *os.File {
	if t.out != nil && term.IsTerminal(int(t.out.Fd())) {
		return t.out
	}
	return t.in
}

// monitorSize queues the terminal's size now and at each resize (SIGWINCH)
// until ctx ends.
func (t terminal) monitorSize(ctx context.Context) remotecommand.TerminalSizeQueue {
	q := &sizeQueue{ch: make(chan remotecommand.TerminalSize, 1), done: ctx.Done()}
	f := t.sizeFile()
	send := func() {
		w, h, err := term.GetSize(int(f.Fd()))
		if err != nil || w <= 0 || h <= 0 {
			return
		}
		select { // only the newest size matters
		case <-q.ch:
		default:
		}
		q.ch <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
	}
	send()
	resized := notifyResize(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-resized:
				send()
			}
		}
	}()
	return q
}

// sizeQueue hands the executor each new size; nil once the run ended.
type sizeQueue struct {
	ch   chan remotecommand.TerminalSize
	done <-chan struct{}
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return &s
	case <-q.done:
		return nil
	}
}
