package instancefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// stageSeq names staged sockets apart within the process.
var stageSeq atomic.Uint64

// BindStaged binds a listening unix stream socket and puts it at dir/name,
// owned by uid:gid (-1 leaves either) with mode, and returns it
// (close-on-exec). The socket is bound in stage, a directory only root
// can write, and its owner and mode are set there, where nothing can be
// swapped under the path; only then is it renamed into dir, opened from
// / with no symlink anywhere. A tenant who can write dir may replace the
// name at any time, but can never make root chmod or chown another file
// through it. No umask is changed: the mode is set after the bind. stage
// and dir must be on one file system, and stage short enough that
// stage/.b<n> fits sun_path.
func BindStaged(stage, dir, name string, uid, gid int, mode os.FileMode, backlog int) (*os.File, error) {
	if name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("bind %s in %s: not a plain file name", name, dir)
	}
	staged := filepath.Join(stage, ".b"+strconv.FormatUint(stageSeq.Add(1), 36))
	full := filepath.Join(dir, name)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for %s: %w", full, err)
	}
	f := os.NewFile(uintptr(fd), full)
	fail := func(op string, err error) (*os.File, error) {
		f.Close()
		_ = unix.Unlink(staged)
		return nil, &os.PathError{Op: op, Path: full, Err: err}
	}
	_ = unix.Unlink(staged) // a dead agent's, if any
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: staged}); err != nil {
		return fail("bind", err)
	}
	if uid >= 0 || gid >= 0 {
		if err := unix.Fchownat(unix.AT_FDCWD, staged, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail("chown", err)
		}
	}
	if err := unix.Fchmodat(unix.AT_FDCWD, staged, uint32(mode.Perm()), 0); err != nil {
		return fail("chmod", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail("listen", err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		return fail("open", err)
	}
	defer d.Close()
	if err := unix.Renameat(unix.AT_FDCWD, staged, int(d.Fd()), name); err != nil {
		return fail("rename", err)
	}
	return f, nil
}
