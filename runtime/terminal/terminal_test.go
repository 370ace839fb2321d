package terminal

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// lockedBuffer is Out, read by the test while the console writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHandOff: the terminal the unit's side opens and hands over is
// served by the console: its first size is set before Hand returns,
// resizes reach it, what is typed reaches the follower end, what is
// written there reaches Out, and Close returns once the follower end is
// gone, with all of it.
func TestHandOff(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tty.sock")
	var out lockedBuffer
	resize := make(chan Size)
	c, err := Listen(sock, Config{Out: &out, In: strings.NewReader("typed\n"), Size: Size{Rows: 24, Cols: 80}, Resize: resize})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctl, fol, err := Open(unix.Getuid(), unix.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	if err := Hand(conn, ctl); err != nil {
		t.Fatal(err)
	}
	unix.Close(ctl)
	unix.Close(conn)
	if got := winsize(t, fol); got != (Size{Rows: 24, Cols: 80}) {
		t.Errorf("first size %+v, want 24x80", got)
	}
	resize <- Size{Rows: 50, Cols: 132}
	waitFor(t, "the resize", func() bool { return winsize(t, fol) == Size{Rows: 50, Cols: 132} })
	typed := make([]byte, 64)
	n, err := unix.Read(fol, typed)
	if err != nil || string(typed[:n]) != "typed\n" {
		t.Errorf("follower read %q, %v; want the typed line", typed[:n], err)
	}
	if _, err := unix.Write(fol, []byte("written\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the output", func() bool { return strings.Contains(out.String(), "written") })
	unix.Close(fol)
	done := make(chan error)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(CutAfter / 2):
		t.Fatal("Close waited although the follower end was gone")
	}
	// The terminal echoes what was typed and turns \n into \r\n.
	if d := cmp.Diff("typed\r\nwritten\r\n", out.String()); d != "" {
		t.Errorf("output (-want,+got):\n%s", d)
	}
}

// TestHandOffRefused: what is not one terminal is not taken, and the
// unit's side hears so.
func TestHandOffRefused(t *testing.T) {
	tests := map[string]func(t *testing.T) int{
		"a pipe": func(t *testing.T) int {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			unix.Close(p[1])
			return p[0]
		},
		"a follower end": func(t *testing.T) int {
			ctl, fol, err := Open(unix.Getuid(), unix.Getgid())
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(ctl)
			return fol
		},
	}
	for name, fd := range tests {
		t.Run(name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "tty.sock")
			c, err := Listen(sock, Config{Out: &lockedBuffer{}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conn, err := Dial(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(conn)
			f := fd(t)
			defer unix.Close(f)
			if err := Hand(conn, f); err == nil {
				t.Error("Hand succeeded")
			}
		})
	}
}

func winsize(t *testing.T, fd int) Size {
	t.Helper()
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		t.Fatal(err)
	}
	return Size{Rows: ws.Row, Cols: ws.Col}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("no %s within 5s", what)
}
