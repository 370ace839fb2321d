package prepare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"golang.org/x/sys/unix"
)

// Directory modes. Parents are search-only for others so the app user and
// the socket group can reach their own dir without listing the others.
const (
	modeParent  = 0o711
	modeDataDir = 0o700
	modeRunDir  = 0o750 | unix.S_ISGID // new sockets get the socket group
	modeLogDir  = 0o700
)

// ensureDir makes dir and its parents (modeParent) one component at a
// time without following a symlink anywhere (instancefs.MkdirAll), then
// sets owner and mode through the open fd, so nothing planted in the path
// is ever created through, chowned or chmoded.
// uid/gid -1 leave the owner/group as they are.
func ensureDir(dir string, mode uint32, uid, gid int) (*os.File, error) {
	parent, err := instancefs.MkdirAll(filepath.Dir(dir), modeParent)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	return ensureSubdir(parent, filepath.Base(dir), mode, uid, gid)
}

// ensureSubdir is ensureDir for a directory directly beneath parent.
func ensureSubdir(parent *os.File, name string, mode uint32, uid, gid int) (*os.File, error) {
	if err := unix.Mkdirat(int(parent.Fd()), name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(parent.Name(), name), Err: err}
	}
	d, err := instancefs.OpenBeneath(parent, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	if err := setOwnerMode(d, mode, uid, gid); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func setOwnerMode(d *os.File, mode uint32, uid, gid int) error {
	if uid >= 0 || gid >= 0 {
		if err := unix.Fchown(int(d.Fd()), uid, gid); err != nil {
			return fmt.Errorf("chown %s: %w", d.Name(), err)
		}
	}
	// chown clears setgid; set the mode after it.
	if err := unix.Fchmod(int(d.Fd()), mode); err != nil {
		return fmt.Errorf("chmod %s: %w", d.Name(), err)
	}
	return nil
}

// removeStale removes name in d if it is there; only that name.
func removeStale(d *os.File, name string) error {
	err := instancefs.RemoveBeneath(d, name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
