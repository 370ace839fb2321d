package prepare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Directory modes. Parents are search-only for others so the app user and
// the socket group can reach their own dir without listing the others.
const (
	modeParent     = 0o711
	modePrivateDir = 0o700
	modeDataDir    = 0o700
	// The run dir is root's: the app and the socket group only pass
	// through it, to their generation's dir and the stable symlink.
	modeRunDir = 0o711 | unix.S_ISGID // new sockets get the socket group
	modeGenDir = 0o750 | unix.S_ISGID
	modeLogDir = 0o700
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

// ensureOwnedDir is ensureDir for a dir the app owns. When its owner is
// not uid yet (an agent that ran apps as root made it, or the Instance's
// identity changed) everything beneath is handed over too, so the app can
// go on using the files it had.
func ensureOwnedDir(dir string, mode uint32, uid, gid int) (*os.File, error) {
	d, err := ensureDir(dir, mode, -1, -1)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err = unix.Fstat(int(d.Fd()), &st); err == nil && (int(st.Uid) != uid || int(st.Gid) != gid) {
		err = chownTree(d, uid, gid)
	}
	if err == nil {
		err = setOwnerMode(d, mode, uid, gid)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// chownTree gives everything beneath d to uid:gid. No symlink is followed
// (the tenant may have planted one) and every directory is opened beneath
// its parent, so the walk cannot leave d.
func chownTree(d *os.File, uid, gid int) error {
	names, err := readDirNames(d)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := unix.Fchownat(int(d.Fd()), n, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "chown", Path: filepath.Join(d.Name(), n), Err: err}
		}
		sub, err := instancefs.OpenBeneath(d, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue // not a directory, or gone
		}
		err = chownTree(sub, uid, gid)
		sub.Close()
		if err != nil {
			return err
		}
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
