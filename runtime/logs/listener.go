// Package logs receives an instance's output on log sockets and named
// pipes: each line goes to the instance's size-rotated file and to the
// agent's structured log with the instance's namespace, name, host, role
// and generation.
package logs

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
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
	Generation            uint64
	Sidecar               string // the sidecar's name, role sidecar only
	Stream                string // "" for combined output; "stderr" for cmd's second socket
}

// source is the label written in front of each line in the file.
func (l Labels) source() string {
	return origin{role: l.Role, gen: l.Generation, sidecar: l.Sidecar, stream: l.Stream}.String()
}

// Options configure a listener.
type Options struct {
	Labels  Labels
	File    *RotatingFile // required
	Logger  logr.Logger   // the zero Logger discards
	MaxLine int           // 0: DefaultMaxLine
	// FIFO, when set, is a named pipe read beside the socket, for a unit
	// whose trampoline writes there (see layout.Proc.LogFIFO). It is made
	// if absent and reused if present; Close leaves it, so an app still
	// writing into it keeps its backlog for the next listener.
	FIFO string
}

// Listener accepts connections on one log socket.
type Listener struct {
	ln     *net.UnixListener
	opts   Options
	log    logr.Logger
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	fifo   *os.File
	closed bool
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
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	l := &Listener{ln: ln, opts: opts, conns: map[net.Conn]struct{}{}}
	lb := opts.Labels
	l.log = opts.Logger.WithValues("namespace", lb.Namespace, "name", lb.Name, "host", lb.Host,
		"role", string(lb.Role), "generation", lb.Generation)
	if lb.Sidecar != "" {
		l.log = l.log.WithValues("sidecar", lb.Sidecar)
	}
	if lb.Stream != "" {
		l.log = l.log.WithValues("stream", lb.Stream)
	}
	if opts.FIFO != "" {
		if err := l.readFIFO(opts.FIFO); err != nil {
			ln.Close()
			return nil, err
		}
	}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Path is the socket's path.
func (l *Listener) Path() string { return l.ln.Addr().String() }

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serve(c)
	}
}

func (l *Listener) serve(c net.Conn) {
	defer l.wg.Done()
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		c.Close()
	}()
	splitLines(c, l.opts.MaxLine, l.emit)
}

func (l *Listener) emit(text string) {
	rec := Record{Time: time.Now(), Source: l.opts.Labels.source(), Text: text}.Line() + "\n"
	if _, err := l.opts.File.Write([]byte(rec)); err != nil {
		l.log.Error(err, "writing log file")
	}
	l.log.Info("output", "line", text)
}

// Close stops accepting, closes open connections and its end of the FIFO,
// waits until every line read so far is written, and removes the socket
// file (not the FIFO).
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.ln.Close()
	for c := range l.conns {
		c.Close()
	}
	if l.fifo != nil {
		l.fifo.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}
