package instancefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrNotSocket is returned by ShareSocket for a name that is not a socket.
var ErrNotSocket = errors.New("not a socket")

// ShareSocket gives the socket dir/name to group gid with mode, so a
// process in that group (a proxy) can connect: an app binds its socket
// under its own umask, which seldom grants the group write. The socket
// is opened as a path beneath dir with no symlink anywhere, checked to be
// a socket, and changed through that open handle: a tenant who swaps the
// name for a link to another file changes nothing but its own socket.
func ShareSocket(dir, name string, gid int, mode os.FileMode) error {
	f, err := Open(dir, name, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	full := filepath.Join(dir, name)
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "stat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return &os.PathError{Op: "share", Path: full, Err: ErrNotSocket}
	}
	if err := unix.Fchownat(int(f.Fd()), "", -1, gid, unix.AT_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "chown", Path: full, Err: err}
	}
	// No fchmod on an O_PATH handle: its /proc/self/fd link names the
	// very inode that was checked, whatever the name points at now.
	if err := os.Chmod("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), mode.Perm()); err != nil {
		return fmt.Errorf("chmod %s: %w", full, err)
	}
	return nil
}
