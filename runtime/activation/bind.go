package activation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Backlog is a held socket's accept queue: connections wait there while
// no generation runs (a swap under Replace, a wake).
const Backlog = 4096

// Bind binds a listening unix stream socket at path, replacing a stale
// file there, and returns it (close-on-exec). gid ≥ 0 gives the file to
// that group with mode 0660, so a front end in it can connect; else it
// is root's alone (0600). path's dir is the app's to write: the socket
// is bound, chowned and chmoded in stage (root's alone, on the same file
// system) and only then renamed there (instancefs.BindStaged), so
// nothing the app swaps in at path is ever chowned or chmoded.
func Bind(stage, path string, gid int) (*os.File, error) {
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
	}
	f, err := instancefs.BindStaged(stage, filepath.Dir(path), filepath.Base(path), -1, gid, mode, Backlog)
	if err != nil {
		return nil, fmt.Errorf("activation: %w", err)
	}
	return f, nil
}

// Link gives the socket file at from a second name, to: the same
// listener, reached by either path (a successor inherits its
// predecessor's socket under its own generation's name). Both dirs are
// the app's to write: each is opened with no symlink anywhere, and
// neither name is followed (unlinkat, linkat without AT_SYMLINK_FOLLOW).
func Link(from, to string) error {
	fd, err := instancefs.OpenDir(filepath.Dir(from))
	if err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	defer fd.Close()
	td, err := instancefs.OpenDir(filepath.Dir(to))
	if err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	defer td.Close()
	if err := instancefs.RemoveBeneath(td, filepath.Base(to)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("activation: remove stale %s: %w", to, err)
	}
	if err := unix.Linkat(int(fd.Fd()), filepath.Base(from), int(td.Fd()), filepath.Base(to), 0); err != nil {
		return fmt.Errorf("activation: link %s to %s: %w", from, to, err)
	}
	return nil
}
