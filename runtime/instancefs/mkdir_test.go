package instancefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAll(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "c")
	d, err := MkdirAll(dir, 0o711)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != dir {
		t.Errorf("opened %q, want %q", d.Name(), dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("not made: %v", err)
	}
	// Existing directories are fine.
	again, err := MkdirAll(dir, 0o711)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

func TestMkdirAllNeverCreatesThroughSymlink(t *testing.T) {
	outside := t.TempDir()
	base := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(base, "instances")); err != nil {
		t.Fatal(err)
	}
	if _, err := MkdirAll(filepath.Join(base, "instances", "ns", "web"), 0o700); !errors.Is(err, ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("created outside: %v", entries)
	}
}
