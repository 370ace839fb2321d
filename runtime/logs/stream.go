package logs

import (
	"errors"
	"io"
	"net"
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
	*acceptor
	w     io.Writer
	errMu sync.Mutex
	err   error // the first write error: the caller is gone
}

// ListenStream binds path and copies what arrives to w. w is written
// from one goroutine per connection: it must be safe for that.
func ListenStream(path string, w io.Writer) (*Stream, error) {
	a, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &Stream{acceptor: a, w: w}
	s.start(s.copy)
	return s, nil
}

func (s *Stream) copy(c net.Conn) {
	if _, err := io.Copy(s.w, c); err != nil {
		s.errMu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.errMu.Unlock()
	}
}

// Close stops accepting and waits until what every writer sent before it
// went away is copied: call it once the run's processes are gone, so each
// connection ends at its EOF. A connection still open after
// StreamCutAfter (a process outside the run was passed the socket) is
// cut. It returns the first error writing to w, and removes the socket
// file.
func (s *Stream) Close() error {
	_, err := s.stop()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(StreamCutAfter):
		s.cut()
		<-done
	}
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return errors.Join(s.err, err)
}

// Feed is a run's stdin: the connection to its socket gets what r
// holds, then its end (EOF). A nil r is an empty stdin.
type Feed struct{ *acceptor }

// ListenFeed binds path and feeds r to the first connection to it.
func ListenFeed(path string, r io.Reader) (*Feed, error) {
	a, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	a.start(func(c net.Conn) {
		once.Do(func() {
			if r != nil {
				_, _ = io.Copy(c, r)
			}
		})
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
	})
	return &Feed{a}, nil
}

// Close stops feeding once the run is gone. It does not wait for r: a
// read from it may block until its own end (the caller's request).
func (f *Feed) Close() error {
	_, err := f.stop()
	f.cut()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
