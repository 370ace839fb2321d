package activation

import (
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/layout/layouttest"
)

// TestHandOffOnce: an offered socket reaches the caller that names it,
// once; the descriptor it gets accepts what clients send to the path.
func TestHandOffOnce(t *testing.T) {
	dir := t.TempDir()
	l, err := Bind(dir, filepath.Join(dir, "app.sock"), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := Serve(filepath.Join(dir, "activation.sock"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(filepath.Join(dir, "activation.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hand-off socket mode: %v %v, want 0600", fi.Mode(), err)
	}
	if err := s.Offer("ns/app/1", l, []string{layouttest.OwnCgroup(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(filepath.Join(dir, "activation.sock"), "ns/app/2"); err == nil {
		t.Fatal("a key never offered was answered")
	}
	fd, err := Fetch(filepath.Join(dir, "activation.sock"), "ns/app/1")
	if err != nil {
		t.Fatal(err)
	}
	got := os.NewFile(uintptr(fd), "fetched")
	defer got.Close()
	if _, err := Fetch(filepath.Join(dir, "activation.sock"), "ns/app/1"); err == nil {
		t.Fatal("an offer was handed out twice")
	}
	gl, err := net.FileListener(got)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	c, err := net.Dial("unix", filepath.Join(dir, "app.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := gl.Accept()
	if err != nil {
		t.Fatalf("the fetched socket does not accept what reaches the path: %v", err)
	}
	a.Close()
}

// TestLinkSharesTheListener: a second name reaches the same socket.
func TestLinkSharesTheListener(t *testing.T) {
	dir := t.TempDir()
	l, err := Bind(dir, filepath.Join(dir, "g1.sock"), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := Link(filepath.Join(dir, "g1.sock"), filepath.Join(dir, "g2.sock")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "g2.sock")); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("mode %v %v, want 0660", fi.Mode(), err)
	}
	c, err := net.Dial("unix", filepath.Join(dir, "g2.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nfd, _, err := unix.Accept4(int(l.Fd()), unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(nfd)
}

// TestWatcherSeesConnections: a connection moves Last and calls arrived;
// one still queued is seen again once re-armed.
func TestWatcherSeesConnections(t *testing.T) {
	dir := t.TempDir()
	l, err := Bind(dir, filepath.Join(dir, "app.sock"), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var calls atomic.Int32
	w, err := NewWatcher(func(key string) {
		if key == "app" {
			calls.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Watch("app", l, time.Now()); err != nil {
		t.Fatal(err)
	}
	began, _ := w.Last("app")
	time.Sleep(50 * time.Millisecond)
	c, err := net.Dial("unix", filepath.Join(dir, "app.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := calls.Load(); got < 2 {
		t.Fatalf("arrived called %d times for a connection left queued over a re-arm, want ≥ 2", got)
	}
	if last, ok := w.Last("app"); !ok || !last.After(began) {
		t.Fatalf("Last = %v, %v; want after the watch began (%v)", last, ok, began)
	}
	w.Unwatch("app")
	if _, ok := w.Last("app"); ok {
		t.Fatal("still watched after Unwatch")
	}
}
