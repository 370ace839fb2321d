package logs

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// readSize is one read's buffer, lent from a pool for the read alone.
const readSize = 16 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// splitLines reads r and calls emit for each line (without its newline),
// cutting lines over max bytes into marked pieces. A connection that waits
// holds no buffer: a node's thousand quiet apps each kept a max-sized
// reader (16 MiB of the agent's heap per thousand) for lines that rarely
// come. Where r is a descriptor on Go's poller, the wait is the poller's
// and a buffer is taken only once there is something to read.
func splitLines(r io.Reader, max int, emit func(text string)) {
	s := splitter{max: max, emit: emit}
	read := blockingRead(r)
	if sc, ok := r.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			read = pollerRead(rc)
		}
	}
	for {
		buf, n, err := read()
		s.feed((*buf)[:n])
		readBufs.Put(buf)
		if err != nil || n == 0 {
			s.end()
			return
		}
	}
}

// readAvailable feeds s what the non-blocking fd holds now, a pooled
// buffer at a time, until it has no more.
func readAvailable(fd int, s *splitter) {
	buf := readBufs.Get().(*[]byte)
	defer readBufs.Put(buf)
	for {
		n, err := unix.Read(fd, *buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		s.feed((*buf)[:n])
	}
}

// blockingRead reads r into a pooled buffer, held while the read waits.
func blockingRead(r io.Reader) func() (*[]byte, int, error) {
	return func() (*[]byte, int, error) {
		buf := readBufs.Get().(*[]byte)
		n, err := r.Read(*buf)
		return buf, n, err
	}
}

// pollerRead reads rc once it is readable, taking a pooled buffer only
// for a read that has data (or its end) to return.
func pollerRead(rc syscall.RawConn) func() (*[]byte, int, error) {
	return func() (*[]byte, int, error) {
		var buf *[]byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			if buf == nil {
				buf = readBufs.Get().(*[]byte)
			}
			for {
				n, rerr = unix.Read(int(fd), *buf)
				if !errors.Is(rerr, unix.EINTR) {
					break
				}
			}
			if errors.Is(rerr, unix.EAGAIN) {
				readBufs.Put(buf) // nothing yet: wait on the poller without it
				buf = nil
				return false
			}
			return true
		})
		if buf == nil {
			buf = readBufs.Get().(*[]byte)
		}
		return buf, max(n, 0), errors.Join(err, rerr)
	}
}

// splitter cuts a byte stream into lines of at most max bytes.
type splitter struct {
	max       int
	emit      func(string)
	line      []byte // the line so far; nil between lines
	continued bool   // line continues one cut at max
}

func (s *splitter) feed(p []byte) {
	for len(p) > 0 {
		room := s.max - len(s.line)
		if i := bytes.IndexByte(p[:min(len(p), room)], '\n'); i >= 0 {
			s.line = append(s.line, p[:i]...)
			p = p[i+1:]
			s.flush(bytes.TrimSuffix(s.line, []byte{'\r'}), false)
			continue
		}
		take := min(len(p), room)
		s.line = append(s.line, p[:take]...)
		p = p[take:]
		if len(s.line) == s.max {
			s.flush(s.line, true)
		}
	}
}

// end emits what is left of a last line without its newline.
func (s *splitter) end() {
	if len(s.line) > 0 || s.continued {
		s.flush(s.line, false)
	}
}

func (s *splitter) flush(b []byte, cut bool) {
	text := string(b)
	if s.continued {
		text = ContinuedMark + text
	}
	if cut {
		text += CutMark
	}
	s.emit(text)
	s.line, s.continued = nil, cut
}
