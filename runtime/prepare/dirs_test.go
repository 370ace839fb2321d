package prepare

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/layout"
)

func TestDataDirSymlinkRefused(t *testing.T) {
	f := newFixture(t)
	outside := t.TempDir()
	var before unix.Stat_t
	if err := unix.Stat(outside, &before); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(f.inst.DataDir()), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, f.inst.DataDir()); err != nil {
		t.Fatal(err)
	}
	_, err := Prepare(f.request(layout.RoleApp, 1))
	if !errors.Is(err, instancefs.ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(outside, &st); err != nil || st.Uid != before.Uid || st.Mode != before.Mode {
		t.Fatalf("outside dir chowned or chmoded: uid %d mode %o, %v", st.Uid, st.Mode, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside: %v", entries)
	}
}

func TestDataDirParentSymlinkRefused(t *testing.T) {
	f := newFixture(t)
	outside := t.TempDir()
	nsDir := filepath.Dir(f.inst.DataDir())
	if err := os.MkdirAll(filepath.Dir(nsDir), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, nsDir); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(f.request(layout.RoleApp, 1)); !errors.Is(err, instancefs.ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("created outside: %v", entries)
	}
}
