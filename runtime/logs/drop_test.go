package logs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

// failing is a log file whose writes fail while fail holds errors, each
// write taking the next one; a failing write first writes half of what it
// was given, as a disk that fills mid-record does.
type failing struct {
	*os.File
	mu   *sync.Mutex
	fail *[]error
}

func (f failing) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(*f.fail) == 0 {
		return f.File.Write(p)
	}
	err := (*f.fail)[0]
	*f.fail = (*f.fail)[1:]
	if err == nil {
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:len(p)/2])
	return n, err
}

// failingFile opens a RotatingFile on a failing file; set the errors with
// the returned function, and read drops from the returned map.
func failingFile(t *testing.T, maxBytes int64) (*RotatingFile, func(...error), func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	var fail []error
	r, err := openRotating(filepath.Join(t.TempDir(), "app.log"), maxBytes, 1, func(path string) (logHandle, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		return failing{File: f, mu: &mu, fail: &fail}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var dmu sync.Mutex
	drops := map[string]int{}
	r.OnDrop(func(reason string) { dmu.Lock(); drops[reason]++; dmu.Unlock() })
	set := func(errs ...error) { mu.Lock(); fail = errs; mu.Unlock() }
	got := func() map[string]int {
		dmu.Lock()
		defer dmu.Unlock()
		return map[string]int{DropNoSpace: drops[DropNoSpace], DropQuota: drops[DropQuota], DropWriteError: drops[DropWriteError]}
	}
	return r, set, got
}

func TestWriteRecordDropsAndMarks(t *testing.T) {
	eio := fmt.Errorf("write app.log: %w", syscall.EIO)
	tests := map[string]struct {
		fail      []error // the errors of the writes after "before"
		lines     []string
		wantFile  []string
		wantDrops map[string]int
	}{
		"full disk: dropped, then a marker and the line": {
			fail:      []error{syscall.ENOSPC, syscall.ENOSPC},
			lines:     []string{"one", "two", "three"},
			wantFile:  []string{"g3 before", "g3 [unitlet: 2 lines dropped: NoSpace]", "g3 three"},
			wantDrops: map[string]int{DropNoSpace: 2, DropQuota: 0, DropWriteError: 0},
		},
		"the marker cannot be written: its line is dropped too": {
			fail:      []error{syscall.ENOSPC, syscall.EDQUOT},
			lines:     []string{"one", "two", "three"},
			wantFile:  []string{"g3 before", "g3 [unitlet: 2 lines dropped: Quota]", "g3 three"},
			wantDrops: map[string]int{DropNoSpace: 1, DropQuota: 1, DropWriteError: 0},
		},
		"another error counts as WriteError": {
			fail:      []error{eio},
			lines:     []string{"one", "two"},
			wantFile:  []string{"g3 before", "g3 [unitlet: 1 lines dropped: WriteError]", "g3 two"},
			wantDrops: map[string]int{DropNoSpace: 0, DropQuota: 0, DropWriteError: 1},
		},
		"no error, no marker": {
			lines:     []string{"one"},
			wantFile:  []string{"g3 before", "g3 one"},
			wantDrops: map[string]int{DropNoSpace: 0, DropQuota: 0, DropWriteError: 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, setFail, drops := failingFile(t, 1<<20)
			rec := func(text string) Record { return Record{Time: time.Unix(1, 0), Source: "g3", Text: text} }
			if err := r.WriteRecord(rec("before")); err != nil {
				t.Fatal(err)
			}
			setFail(tc.fail...)
			for _, l := range tc.lines {
				_ = r.WriteRecord(rec(l))
			}
			if diff := cmp.Diff(tc.wantFile, fileLines(t, r.Path(), len(tc.wantFile))); diff != "" {
				t.Errorf("file (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDrops, drops()); diff != "" {
				t.Errorf("drops (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteRecordErrors(t *testing.T) {
	r, setFail, _ := failingFile(t, 1<<20)
	setFail(syscall.ENOSPC, syscall.ENOSPC)
	rec := Record{Time: time.Unix(1, 0), Source: "g3", Text: "x"}
	var first, second *DropError
	if err := r.WriteRecord(rec); !asDrop(err, &first) || !first.First || first.Reason != DropNoSpace {
		t.Errorf("first drop: %v, want a first DropError of NoSpace", err)
	}
	if err := r.WriteRecord(rec); !asDrop(err, &second) || second.First {
		t.Errorf("second drop: %v, want a DropError not first", err)
	}
	r.Close()
	if err := r.WriteRecord(rec); err != os.ErrClosed {
		t.Errorf("after Close: %v, want os.ErrClosed", err)
	}
}

func asDrop(err error, d **DropError) bool {
	e, ok := err.(*DropError)
	*d = e
	return ok && e != nil
}

// TestListenerKeepsReadingWhileFull: an app writing a megabyte while no
// line can be written is never blocked; its lines are counted as
// dropped, and once the file takes lines again the marker and the new
// lines follow what was written before.
func TestListenerKeepsReadingWhileFull(t *testing.T) {
	const lines = 5000 // ~1 MiB: far past the socket's buffer
	file, setFail, drops := failingFile(t, 64<<20)
	dir := t.TempDir()
	l, err := Listen(filepath.Join(dir, "g3.sock"), Options{
		Labels: Labels{Namespace: "ns", Name: "web", Role: layout.RoleApp, Generation: 3}, File: file,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	fileLines(t, file.Path(), 1)
	full := make([]error, lines)
	for i := range full {
		full[i] = syscall.ENOSPC
	}
	setFail(full...)
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 200)
	for i := range lines {
		if _, err := fmt.Fprintf(c, "line %d %s\n", i, pad); err != nil {
			t.Fatalf("the app blocked writing line %d: %v", i, err)
		}
	}
	if _, err := c.Write([]byte("back\n")); err != nil {
		t.Fatal(err)
	}
	want := []string{"g3 kept", fmt.Sprintf("g3 [unitlet: %d lines dropped: NoSpace]", lines), "g3 back"}
	if diff := cmp.Diff(want, fileLines(t, file.Path(), 3)); diff != "" {
		t.Errorf("file (-want,+got):\n%s", diff)
	}
	if got := drops()[DropNoSpace]; got != lines {
		t.Errorf("dropped %d lines, want %d", got, lines)
	}
}
