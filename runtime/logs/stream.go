package logs

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// StreamCutAfter bounds how long Close waits for a connection's EOF.
const StreamCutAfter = 2 * time.Second

// Stream hands a run's output to its caller as it comes: every
// connection to its socket is copied, bytes as written, to one writer.
// Nothing goes to the Instance's log file: a run's output is its
// caller's.
type Stream struct {
	ln    *net.UnixListener
	w     io.Writer
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	err   error // the first write error: the caller is gone
}

// ListenStream binds path (mode 0600: only the trampoline, still root,
// connects) and copies what arrives to w. w is written from one goroutine
// per connection: it must be safe for that.
func ListenStream(path string, w io.Writer) (*Stream, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	s := &Stream{ln: ln, w: w, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *Stream) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.copy(c)
	}
}

func (s *Stream) copy(c net.Conn) {
	defer s.wg.Done()
	_, err := io.Copy(s.w, c)
	s.mu.Lock()
	delete(s.conns, c)
	if err != nil && s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	c.Close()
}

// Close stops accepting and waits until what every writer sent before it
// went away is copied: call it once the run's processes are gone, so each
// connection ends at its EOF. Connections still open are cut. It returns
// the first error writing to w, and removes the socket file.
func (s *Stream) Close() error {
	s.ln.SetUnlinkOnClose(true)
	err := s.ln.Close()
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	if open > 0 {
		s.waitOrCut()
	} else {
		s.wg.Wait()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(s.err, err)
}

// waitOrCut waits for the open connections to reach EOF; with the run's
// cgroup proven empty no writer is left, so they do at once, unless a
// process outside it (passed the socket) still holds one: that one is cut.
func (s *Stream) waitOrCut() {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(StreamCutAfter):
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
	}
}
