package logs

import (
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Quiet connections hold no read buffer: 300 apps connected and silent
// cost the agent's heap far less than a line buffer each (16 KiB: 4.7 MiB
// for these), and a line sent afterwards still arrives whole.
func TestQuietConnectionsHoldNoBuffer(t *testing.T) {
	l, _, capt := startListener(t, 0)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const n = 300
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(500 * time.Millisecond) // every connection accepted and waiting
	grown := int64(heap()) - int64(before)
	if limit := int64(n * DefaultMaxLine / 4); grown > limit {
		t.Errorf("heap grew %d KiB for %d quiet connections, want under %d KiB", grown>>10, n, limit>>10)
	}
	if _, err := conns[n-1].Write([]byte("still here\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range capt.all() {
			if strings.Contains(line, "still here") {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the line sent after the quiet spell never arrived; got %v", capt.all())
}

// Quiet listeners, socket and FIFO, hold no goroutine each: their waits
// are the event loop's. A line written to one still arrives.
func TestQuietListenersHoldNoGoroutine(t *testing.T) {
	file, err := OpenRotating(filepath.Join(t.TempDir(), "app.log"), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	fifoListener(t, t.TempDir(), file).Close() // the loop started
	before := runtime.NumGoroutine()
	const n = 50
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = t.TempDir()
		l := fifoListener(t, dirs[i], file)
		t.Cleanup(func() { l.Close() })
	}
	if grown := runtime.NumGoroutine() - before; grown > n/10 {
		t.Errorf("%d goroutines more for %d quiet listeners, want (about) none", grown, n)
	}
	app, err := OpenFIFO(filepath.Join(dirs[n-1], "g3.fifo"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(app)
	if _, err := unix.Write(app, []byte("still here\n")); err != nil {
		t.Fatal(err)
	}
	fileLines(t, file.Path(), 1)
}
