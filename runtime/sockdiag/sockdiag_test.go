package sockdiag

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func listen(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func look(t *testing.T, f File) State {
	t.Helper()
	got, err := Look(f)
	if err != nil {
		t.Fatal(err)
	}
	return got[f]
}

// TestLookFollowsOneListener walks a listener through queued, accepted
// and closed connections; the kernel's counts are what Look reports.
func TestLookFollowsOneListener(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.sock")
	l := listen(t, path)
	f, err := FileOf(path)
	if err != nil {
		t.Fatal(err)
	}
	// A listener elsewhere, with its own connection: never counted here.
	other := listen(t, filepath.Join(dir, "other.sock"))
	oc, err := net.Dial("unix", filepath.Join(dir, "other.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	oa, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()

	if diff := cmp.Diff(State{Listening: true}, look(t, f)); diff != "" {
		t.Fatalf("idle listener (-want,+got):\n%s", diff)
	}
	c1, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(State{Listening: true, Queued: 2}, look(t, f)); diff != "" {
		t.Fatalf("two queued (-want,+got):\n%s", diff)
	}
	a1, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(State{Listening: true, Queued: 1, Open: 1}, look(t, f)); diff != "" {
		t.Fatalf("one accepted (-want,+got):\n%s", diff)
	}
	// The clients leave; what the app holds or has not accepted still counts.
	c1.Close()
	c2.Close()
	if diff := cmp.Diff(State{Listening: true, Queued: 1, Open: 1}, look(t, f)); diff != "" {
		t.Fatalf("clients gone (-want,+got):\n%s", diff)
	}
	a2, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a1.Close()
	a2.Close()
	got := look(t, f)
	if diff := cmp.Diff(State{Listening: true}, got); diff != "" || !got.Drained() {
		t.Fatalf("all closed: drained=%v (-want,+got):\n%s", got.Drained(), diff)
	}
	l.Close()
	if got := look(t, f); got.Listening || got.Drained() {
		t.Fatalf("closed listener: %+v, drained=%v; want not seen, not drained", got, got.Drained())
	}
}

// TestLookByFileNotPath: an app that bound through another path (here a
// symlinked dir) is still found by the file it bound.
func TestLookByFileNotPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	l := listen(t, filepath.Join(dir, "link", "app.sock"))
	c, err := net.Dial("unix", filepath.Join(dir, "real", "app.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, err := FileOf(filepath.Join(dir, "real", "app.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(State{Listening: true, Open: 1}, look(t, f)); diff != "" {
		t.Fatalf("(-want,+got):\n%s", diff)
	}
}

func TestFileOfRefusesNonSockets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FileOf(p); err == nil {
		t.Fatal("a regular file accepted as a socket")
	}
	if _, err := FileOf(p + ".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
