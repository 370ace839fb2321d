package logs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

// captured collects what a real logr sink (funcr) receives.
type captured struct {
	mu    sync.Mutex
	lines []string
}

func (c *captured) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		c.mu.Lock()
		c.lines = append(c.lines, args)
		c.mu.Unlock()
	}, funcr.Options{})
}

func (c *captured) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func startListener(t *testing.T, maxLine int) (*Listener, string, *captured) {
	t.Helper()
	dir := t.TempDir()
	file, err := OpenRotating(filepath.Join(dir, "app.log"), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	cap := &captured{}
	l, err := Listen(filepath.Join(dir, "g3.sock"), Options{
		Labels:  Labels{Namespace: "ns", Name: "web", Host: "shop.example.com", Role: layout.RoleApp, Generation: 3},
		File:    file,
		Logger:  cap.logger(),
		MaxLine: maxLine,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, file.Path(), cap
}

// fileLines waits until the log file holds n lines and returns their text
// (after the timestamp and source).
func fileLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		recs := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) > 0 && len(recs) >= n {
			var out []string
			for _, r := range recs {
				parts := strings.SplitN(r, " ", 3)
				if len(parts) != 3 {
					t.Fatalf("malformed record %q", r)
				}
				out = append(out, parts[1]+" "+parts[2])
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("log file holds %q, want %d lines", b, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLinesReachFileAndLogger(t *testing.T) {
	l, path, cap := startListener(t, 0)
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello\r\nworld\nno newline")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got := fileLines(t, path, 3)
	if d := cmp.Diff([]string{"g3 hello", "g3 world", "g3 no newline"}, got); d != "" {
		t.Errorf("file (-want,+got):\n%s", d)
	}
	logged := cap.all()
	if len(logged) != 3 {
		t.Fatalf("logger got %q", logged)
	}
	for _, kv := range []string{`"namespace"="ns"`, `"name"="web"`, `"host"="shop.example.com"`, `"role"="run"`, `"generation"=3`, `"line"="hello"`} {
		if !strings.Contains(logged[0], kv) {
			t.Errorf("logged %q lacks %s", logged[0], kv)
		}
	}
}

func TestOverlongLineCutAndMarked(t *testing.T) {
	l, path, _ := startListener(t, 16)
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	long := "0123456789abcdefGHIJKLMNOPQRSTUVwxyz"
	if _, err := c.Write([]byte(long + "\nshort\n")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got := fileLines(t, path, 4)
	want := []string{
		"g3 0123456789abcdef" + CutMark,
		"g3 " + ContinuedMark + "GHIJKLMNOPQRSTUV" + CutMark,
		"g3 " + ContinuedMark + "wxyz",
		"g3 short",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

// closeWithin closes l and fails when Close hangs on what it waits for.
func closeWithin(t *testing.T, l *Listener, on string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Close hangs on %s", on)
	}
}

func TestCloseStopsAndRemovesSocket(t *testing.T) {
	l, _, _ := startListener(t, 0)
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closeWithin(t, l, "an open connection")
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left behind: %v", err)
	}
}

// Each slot's lines carry a source of their own, so two sidecars writing
// into one file stay apart.
func TestLabelsSource(t *testing.T) {
	tests := map[string]struct {
		labels Labels
		want   string
	}{
		"generation":   {Labels{Role: layout.RoleApp, Generation: 3}, "g3"},
		"seed":         {Labels{Role: layout.RoleSeed}, "seed"},
		"sidecar":      {Labels{Role: layout.RoleSidecar, Sidecar: "cache"}, "sidecar.cache"},
		"cmd's stderr": {Labels{Role: layout.RoleCommand, Stream: "stderr"}, "cmd/stderr"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.labels.source()); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
