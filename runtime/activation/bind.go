package activation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Backlog is a held socket's accept queue: connections wait there while
// no generation runs (a swap under Replace, a wake).
const Backlog = 4096

// Bind binds a listening unix stream socket at path, replacing a stale
// file there, and returns it (close-on-exec). gid ≥ 0 gives the file to
// that group with mode 0660, so a front end in it can connect.
func Bind(path string, gid int) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("activation: socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	fail := func(op string, err error) (*os.File, error) {
		f.Close()
		return nil, fmt.Errorf("activation: %s %s: %w", op, path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("remove stale", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return fail("bind", err)
	}
	if gid >= 0 {
		if err := unix.Fchownat(unix.AT_FDCWD, path, 0, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail("chown", err)
		}
		if err := unix.Fchmodat(unix.AT_FDCWD, path, 0o660, 0); err != nil {
			return fail("chmod", err)
		}
	}
	if err := unix.Listen(fd, Backlog); err != nil {
		return fail("listen", err)
	}
	return f, nil
}

// Link gives the socket file at from a second name, to: the same
// listener, reached by either path (a successor inherits its
// predecessor's socket under its own generation's name).
func Link(from, to string) error {
	if err := os.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("activation: remove stale %s: %w", to, err)
	}
	if err := os.Link(from, to); err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	return nil
}
