package trampoline

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// privateTmp are mounted afresh (tmpfs), one per process, like systemd's
// PrivateTmp.
var privateTmp = []string{"/tmp", "/var/tmp"}

// sandbox gives the calling thread a mount namespace of its own in which
// the whole file system is read-only except writable (bound onto
// themselves) and a private /tmp and /var/tmp, /sys included (and with it
// the cgroup file systems); then the Instance's world (world.go) covers
// /dev and /proc. The same on both backends: it is the trampoline, not
// the unit manager, that builds it. The thread must be locked: unshare
// applies to it alone, and exec happens from it.
func sandbox(writable []string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// Nothing done here may reach the node's own mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Copies of the writable trees, taken before anything is made
	// read-only or hidden (a state root below /tmp or /dev/shm, as in
	// tests), placed last.
	trees := make([]int, len(writable))
	for i, w := range writable {
		fd, err := unix.OpenTree(unix.AT_FDCWD, w, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("bind %s writable: %w", w, err)
		}
		defer unix.Close(fd)
		trees[i] = fd
	}
	if err := allReadOnly(); err != nil {
		return err
	}
	if err := privateTmps(); err != nil {
		return err
	}
	if err := world(writable); err != nil {
		return err
	}
	for i, w := range writable {
		if err := os.MkdirAll(w, 0o711); err != nil { // only where a tmpfs hid it
			return fmt.Errorf("bind %s writable: %w", w, err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, w, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("bind %s writable: %w", w, err)
		}
	}
	// The private /dev's own tmpfs last: a writable tree may sit below it.
	return setReadOnly("/dev", false)
}

// allReadOnly makes every mount of this namespace read-only.
func allReadOnly() error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, m := range mounts {
		if m.readOnly {
			continue
		}
		err := unix.MountSetattr(unix.AT_FDCWD, m.path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, &ro)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("make %s read-only: %w", m.path, err)
		}
	}
	return nil
}

// privateTmps mounts a fresh tmpfs on each of privateTmp that exists.
func privateTmps() error {
	for _, t := range privateTmp {
		if fi, err := os.Lstat(t); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", t, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("private %s: %w", t, err)
		}
	}
	return nil
}

// under reports whether path is one of dirs or beneath one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// mountPoints reads this namespace's mounts (mountinfo(5)).
func mountPoints() ([]mountPoint, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	out := make([]mountPoint, 0, len(infos))
	for _, m := range infos {
		ro := false
		for _, o := range strings.Split(m.Options, ",") {
			ro = ro || o == "ro"
		}
		out = append(out, mountPoint{path: m.Mountpoint, readOnly: ro})
	}
	return out, nil
}

type mountPoint struct {
	path     string
	readOnly bool
}
