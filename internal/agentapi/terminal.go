package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// TerminalSize is a terminal's size in characters, as the exec
// protocols' resize channel carries it.
type TerminalSize struct {
	Width  uint16 `json:"width"`
	Height uint16 `json:"height"`
}

// TerminalWriter writes the frames of a TTY run's request body: stdin
// (Write) and resizes, from any goroutine.
type TerminalWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewTerminalWriter frames onto w, after the request line.
func NewTerminalWriter(w io.Writer) *TerminalWriter { return &TerminalWriter{w: w} }

// Write sends p as stdin frames, cut at MaxFrame.
func (t *TerminalWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		n := min(len(rest), MaxFrame)
		if err := t.frame(FrameStdin, rest[:n]); err != nil {
			return len(p) - len(rest), err
		}
		rest = rest[n:]
	}
	return len(p), nil
}

// Resize sends a resize frame.
func (t *TerminalWriter) Resize(s TerminalSize) error {
	b, _ := json.Marshal(s)
	return t.frame(FrameResize, b)
}

func (t *TerminalWriter) frame(k FrameKind, b []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return WriteFrame(t.w, k, b)
}

// ReadTerminalInput reads a TTY run's request frames from r until its
// end: stdin frames are written to stdin, resize frames handed to resize.
// The body's end (io.EOF at a frame boundary) is stdin's end and returns
// nil; a frame of another kind, a malformed resize or a write error ends
// it with that error.
func ReadTerminalInput(r io.Reader, stdin io.Writer, resize func(TerminalSize)) error {
	for {
		kind, b, err := ReadFrame(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("terminal input: %w", err)
		}
		switch kind {
		case FrameStdin:
			if _, err := stdin.Write(b); err != nil {
				return fmt.Errorf("terminal input: %w", err)
			}
		case FrameResize:
			var s TerminalSize
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("terminal input: resize: %w", err)
			}
			resize(s)
		default:
			return fmt.Errorf("terminal input: unexpected frame kind %d", kind)
		}
	}
}
