package logs

import (
	"errors"
	"io"
)

// tailBuffer holds back the last n records a reader selects until it has
// caught up with the files, then emits them and passes the rest through:
// `logs --tail` is the last n lines, then (with follow) the new ones.
type tailBuffer struct {
	n     int64
	emit  func(Record) error
	ring  []Record
	start int // ring[start] is the oldest once the ring is full
	live  bool
}

// newTailBuffer wraps emit; n <= 0 passes everything through at once.
func newTailBuffer(n int64, emit func(Record) error) *tailBuffer {
	return &tailBuffer{n: n, emit: emit, live: n <= 0}
}

func (b *tailBuffer) add(r Record) error {
	if b.live {
		return b.emit(r)
	}
	if int64(len(b.ring)) < b.n {
		b.ring = append(b.ring, r)
		return nil
	}
	b.ring[b.start] = r
	b.start = (b.start + 1) % len(b.ring)
	return nil
}

// caughtUp emits what is held, oldest first, once; records added after
// go straight through.
func (b *tailBuffer) caughtUp() error {
	if b.live {
		return nil
	}
	b.live = true
	held := append(b.ring[b.start:], b.ring[:b.start]...)
	b.ring = nil
	for _, r := range held {
		if err := b.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// ErrLimit ends a read whose output reached its byte limit: the reader
// stops there, as `kubectl logs --limit-bytes` does.
var ErrLimit = errors.New("log byte limit reached")

// LimitWriter passes at most n bytes to w (n <= 0: no limit), cutting the
// write that reaches the limit, and fails with ErrLimit from then on,
// including on that write, so a follower ends without waiting for more.
func LimitWriter(w io.Writer, n int64) io.Writer {
	if n <= 0 {
		return w
	}
	return &limitWriter{w: w, left: n}
}

type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, ErrLimit
	}
	cut := p
	if int64(len(cut)) > l.left {
		cut = cut[:l.left]
	}
	n, err := l.w.Write(cut)
	l.left -= int64(n)
	if err != nil {
		return n, err
	}
	if l.left <= 0 {
		return n, ErrLimit
	}
	return n, nil
}
