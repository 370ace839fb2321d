// Package logs receives an instance's output on log sockets and named
// pipes: each line goes to the instance's size-rotated file and to the
// agent's structured log with the instance's namespace, name, host, role
// and generation.
package logs

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/unitlet/unitlet/runtime/evloop"
	"github.com/unitlet/unitlet/runtime/layout"
)

// DefaultMaxLine bounds one line; a longer one is cut into pieces, each
// marked, so nothing is lost and memory stays bounded.
const DefaultMaxLine = 16 << 10

// CutMark ends a piece of a line that was cut; the next piece starts with
// ContinuedMark.
const (
	CutMark       = " [line cut, continues]"
	ContinuedMark = "[continued] "
)

// Labels say whose output a socket carries.
type Labels struct {
	Namespace, Name, Host string
	Role                  layout.Role
	Generation            int64
	Sidecar               string // the sidecar's name, role sidecar only
	Stream                string // "" for combined output; "stderr" for cmd's second socket
}

// source is the label written in front of each line in the file.
func (l Labels) source() string {
	return origin{role: l.Role, gen: l.Generation, sidecar: l.Sidecar, stream: l.Stream}.String()
}

// logger is log with the labels. The agent's log (lazylog) encodes them
// only once a line is written: a quiet slot's listener keeps the list.
func (l Labels) logger(log logr.Logger) logr.Logger {
	kv := []any{"namespace", l.Namespace, "name", l.Name, "host", l.Host,
		"role", string(l.Role), "generation", l.Generation}
	if l.Sidecar != "" {
		kv = append(kv, "sidecar", l.Sidecar)
	}
	if l.Stream != "" {
		kv = append(kv, "stream", l.Stream)
	}
	return log.WithValues(kv...)
}

// Options configure a listener.
type Options struct {
	Labels  Labels
	File    *RotatingFile // required
	Logger  logr.Logger   // the zero Logger discards
	MaxLine int           // 0: DefaultMaxLine
	// FIFO, when set, is a named pipe read beside the socket, for a unit
	// whose trampoline writes there (see layout.Slot.LogFIFO). It is made
	// if absent and reused if present; Close leaves it, so an app still
	// writing into it keeps its backlog for the next listener.
	FIFO string
}

// Listener accepts connections on one log socket.
type Listener struct {
	*acceptor
	opts Options
	log  logr.Logger // opts.Logger with the labels
	// The FIFO: read from the event loop (fifoReg, fifoFD, fifoLines: the
	// line in progress across reads), else by a goroutine over fifo.
	fifo      *os.File
	fifoReg   *evloop.Reg
	fifoFD    int
	fifoLines *splitter
}

// Listen binds path (mode 0600: only the agent and the trampoline, before
// it drops privileges, connect) and starts accepting.
func Listen(path string, opts Options) (*Listener, error) {
	if opts.File == nil {
		return nil, errors.New("log listener: no file")
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	a, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	l := &Listener{acceptor: a, opts: opts, log: opts.Labels.logger(opts.Logger)}
	if opts.FIFO != "" {
		if err := l.readFIFO(opts.FIFO); err != nil {
			a.ln.Close()
			return nil, err
		}
	}
	l.start(func(c net.Conn) { splitLines(c, l.opts.MaxLine, l.emit) })
	return l, nil
}

// Path is the socket's path.
func (l *Listener) Path() string { return l.ln.Addr().String() }

// emit writes one line to the file and the agent's log. A line the file
// cannot take is dropped there (and counted): reading goes on, so the app
// never blocks on its output. A run of drops is logged once, at its start.
func (l *Listener) emit(text string) {
	err := l.opts.File.WriteRecord(Record{Time: time.Now(), Source: l.opts.Labels.source(), Text: text})
	var drop *DropError
	switch {
	case errors.As(err, &drop):
		if drop.First {
			l.log.Error(err, "log file not writable: dropping lines until it is", "reason", drop.Reason)
		}
	case err != nil:
		l.log.Error(err, "writing log file")
	}
	l.log.Info("output", "line", text)
}

// Close stops accepting, closes open connections and its end of the FIFO,
// waits until every line read so far is written, and removes the socket
// file (not the FIFO).
func (l *Listener) Close() error {
	first, err := l.stop()
	if !first {
		return nil
	}
	l.cut()
	l.closeFIFO(l.wg.Wait)
	return err
}
