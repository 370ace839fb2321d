package instancefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// MkdirAll makes each missing component of the absolute path dir with
// mode (less the umask), one at a time from /, opening every component
// with no symlink followed. Unlike os.MkdirAll it never creates anything
// through a symlink planted in the path: it stops with ErrSymlink at the
// first one. It returns dir open.
func MkdirAll(dir string, mode os.FileMode) (*os.File, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("mkdir %s: directory must be absolute", dir)
	}
	// The common case: it all exists. One openat2 checks every component.
	if d, err := OpenDir(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		return d, err
	}
	cur, err := OpenDir("/")
	if err != nil {
		return nil, err
	}
	for _, comp := range strings.Split(filepath.Clean(dir), "/") {
		if comp == "" {
			continue
		}
		err := unix.Mkdirat(int(cur.Fd()), comp, uint32(mode.Perm()))
		if err != nil && !errors.Is(err, unix.EEXIST) {
			cur.Close()
			return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(cur.Name(), comp), Err: err}
		}
		next, err := OpenBeneath(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}
