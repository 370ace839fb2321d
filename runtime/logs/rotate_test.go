package logs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRotateKeepsN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "app.log")
	r, err := OpenRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// 10 records of 40 bytes: two fit a file, so five files' worth,
	// of which the current one and two rotated ones are kept.
	for i := range 10 {
		if _, err := fmt.Fprintf(r, "%-39d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(path), e.Name()))
		got[e.Name()] = strings.Join(strings.Fields(string(b)), ",")
	}
	want := map[string]string{
		"app.log":   "8,9",
		"app.log.1": "6,7",
		"app.log.2": "4,5",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want,+got):\n%s", d)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestRotateKeepZeroTruncates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenRotating(path, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	for _, s := range []string{"aaaaaaaa\n", "bbbbbbbb\n"} {
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	b, _ := os.ReadFile(path)
	if len(entries) != 1 || string(b) != "bbbbbbbb\n" {
		t.Fatalf("entries %v, content %q", entries, b)
	}
}
