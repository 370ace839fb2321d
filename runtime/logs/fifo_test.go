package logs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/layout"
)

// fifoListener listens on a socket and the FIFO beside it in dir.
func fifoListener(t *testing.T, dir string, file *RotatingFile) *Listener {
	t.Helper()
	l, err := Listen(filepath.Join(dir, "g3.sock"), Options{
		Labels: Labels{Namespace: "ns", Name: "web", Role: layout.RoleApp, Generation: 3},
		File:   file,
		FIFO:   filepath.Join(dir, "g3.fifo"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// An app's output in the FIFO reaches the file; what it writes while no
// listener reads (an agent restart) waits in the pipe for the next one;
// and its writes never fail for want of a reader.
func TestFIFOOutlivesItsListener(t *testing.T) {
	dir := t.TempDir()
	file, err := OpenRotating(filepath.Join(dir, "app.log"), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	first := fifoListener(t, dir, file)
	// The app's stdout, as the trampoline opens it.
	app, err := OpenFIFO(filepath.Join(dir, "g3.fifo"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(app)
	write := func(s string) {
		t.Helper()
		if _, err := unix.Write(app, []byte(s)); err != nil {
			t.Fatalf("app write %q: %v", s, err)
		}
	}
	write("before\n")
	fileLines(t, file.Path(), 1)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g3.fifo")); err != nil {
		t.Fatalf("Close removed the FIFO: %v", err)
	}
	write("while no agent reads\n") // no EPIPE, no SIGPIPE: the app holds a reader
	second := fifoListener(t, dir, file)
	defer second.Close()
	write("after\n")
	got := fileLines(t, file.Path(), 3)
	if d := cmp.Diff([]string{"g3 before", "g3 while no agent reads", "g3 after"}, got); d != "" {
		t.Errorf("file (-want,+got):\n%s", d)
	}
}

func TestOpenFIFORefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "real.fifo")
	if err := MakeFIFO(fifo); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.fifo")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path string
		want error
	}{
		"a regular file": {regular, ErrNotFIFO},
		"a symlink":      {link, unix.ELOOP},
		"nothing":        {filepath.Join(dir, "none"), os.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fd, err := OpenFIFO(tc.path, false)
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("OpenFIFO(%s) = %v, want %v", tc.path, err, tc.want)
			}
			if name != "nothing" {
				if err := MakeFIFO(tc.path); !errors.Is(err, tc.want) {
					t.Errorf("MakeFIFO over %s = %v, want %v", name, err, tc.want)
				}
			}
		})
	}
	// An existing FIFO is reused as it is.
	if err := MakeFIFO(fifo); err != nil {
		t.Errorf("MakeFIFO over a FIFO: %v", err)
	}
}

// Close ends a read in progress on the FIFO at once.
func TestCloseEndsFIFORead(t *testing.T) {
	dir := t.TempDir()
	file, err := OpenRotating(filepath.Join(dir, "app.log"), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	closeWithin(t, fifoListener(t, dir, file), "the FIFO read")
}
