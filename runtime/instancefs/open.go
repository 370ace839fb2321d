package instancefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNoOpenat2 is returned on kernels without openat2 (before 5.6): the
// symlink guard cannot be had there, so nothing is opened.
var ErrNoOpenat2 = errors.New("kernel lacks openat2: refusing to open tenant files without symlink protection")

// ErrSymlink is returned when a component of the path is a symlink.
var ErrSymlink = errors.New("path crosses a symlink")

// openat2 is swapped by tests to show the ENOSYS refusal, which a kernel
// that has the call cannot produce on demand.
var openat2 = unix.Openat2

const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS

// open2 calls openat2, retrying EINTR and the EAGAIN the kernel returns
// when a concurrent rename makes a RESOLVE_BENEATH walk unsafe to finish.
func open2(dirfd int, path string, flags int, mode uint32, resolve uint64) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	var err error
	for range 16 {
		var fd int
		fd, err = openat2(dirfd, path, how)
		if err == nil {
			return fd, nil
		}
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	switch err {
	case unix.ENOSYS:
		return -1, ErrNoOpenat2
	case unix.ELOOP:
		return -1, fmt.Errorf("%w: %w", ErrSymlink, err)
	}
	return -1, err
}

// OpenDir opens dir (absolute) for use as the base of the calls below,
// refusing a symlink in any of its components.
func OpenDir(dir string) (*os.File, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("open %s: directory must be absolute", dir)
	}
	fd, err := open2(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0, unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// OpenBeneath opens name (relative, may have several components) beneath
// the open directory d with flags and mode, following no symlink and never
// leaving d.
func OpenBeneath(d *os.File, name string, flags int, mode os.FileMode) (*os.File, error) {
	full := filepath.Join(d.Name(), name)
	if filepath.IsAbs(name) {
		return nil, &os.PathError{Op: "open", Path: full, Err: errors.New("name must be relative")}
	}
	fd, err := open2(int(d.Fd()), name, flags, uint32(mode.Perm()), resolveBeneath)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), nil
}

// Open opens dir/name as OpenDir then OpenBeneath do.
func Open(dir, name string, flags int, mode os.FileMode) (*os.File, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return OpenBeneath(d, name, flags, mode)
}

// RemoveBeneath unlinks name in the directory d. The final component is
// never followed by unlink, and the parent is opened beneath d.
func RemoveBeneath(d *os.File, name string) error {
	parent, base, err := openParent(d, name)
	if err != nil {
		return err
	}
	if parent != d {
		defer parent.Close()
	}
	if err := unix.Unlinkat(int(parent.Fd()), base, 0); err != nil {
		return &os.PathError{Op: "remove", Path: filepath.Join(d.Name(), name), Err: err}
	}
	return nil
}

// openParent returns the directory holding name's last component (d
// itself for a plain name) and that component.
func openParent(d *os.File, name string) (*os.File, string, error) {
	dir, base := filepath.Split(filepath.Clean(name))
	if base == "" || base == "." || base == ".." || filepath.IsAbs(name) {
		return nil, "", &os.PathError{Op: "open", Path: name, Err: errors.New("not a file name beneath the directory")}
	}
	if dir == "" {
		return d, base, nil
	}
	p, err := OpenBeneath(d, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return p, base, nil
}
