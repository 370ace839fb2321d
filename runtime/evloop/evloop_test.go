//go:build linux

package evloop

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func loop(t *testing.T) *Loop {
	t.Helper()
	l, err := New()
	if err != nil {
		t.Fatal(err) // on Linux the loop must come up: the node relies on it
	}
	return l
}

func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

func wait(t *testing.T, ch <-chan struct{}, want bool) {
	t.Helper()
	select {
	case <-ch:
		if !want {
			t.Fatal("callback ran, want none")
		}
	case <-time.After(200 * time.Millisecond):
		if want {
			t.Fatal("no callback")
		}
	}
}

// A registration calls back once per arm, and never after Remove.
func TestOneShotRearmRemove(t *testing.T) {
	l := loop(t)
	r, w := pipe(t)
	called := make(chan struct{}, 10)
	reg, err := l.Add(r, func(*Reg) { called <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	wait(t, called, false)
	unix.Write(w, []byte("x"))
	wait(t, called, true)
	wait(t, called, false) // still readable, but one shot
	if err := reg.Rearm(); err != nil {
		t.Fatal(err)
	}
	wait(t, called, true) // level: readable still
	reg.Remove()
	if err := reg.Rearm(); err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("y"))
	wait(t, called, false)
}

// Remove waits for a callback in progress; Stop from the callback does not
// deadlock.
func TestRemoveWaitsForCallback(t *testing.T) {
	l := loop(t)
	r, w := pipe(t)
	in, release := make(chan struct{}), make(chan struct{})
	reg, err := l.Add(r, func(reg *Reg) { close(in); <-release; reg.Stop() })
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("x"))
	<-in
	removed := make(chan struct{})
	go func() { reg.Remove(); close(removed) }()
	wait(t, removed, false)
	close(release)
	wait(t, removed, true)
}

// Connections queued on a listener reach fn, each once, as they come.
func TestOnAccept(t *testing.T) {
	l := loop(t)
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 10)
	reg, err := l.OnAccept(ln, func(c net.Conn) { got <- c })
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Remove()
	for i := range 3 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case s := <-got:
			s.Close()
		case <-time.After(2 * time.Second):
			t.Fatalf("connection %d not accepted", i)
		}
	}
	select {
	case <-got:
		t.Fatal("a connection handed over twice")
	case <-time.After(100 * time.Millisecond):
	}
	_ = os.Remove(path)
}
