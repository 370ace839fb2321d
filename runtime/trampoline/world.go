package trampoline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// An Instance's world: what its processes see of the node's kernel once
// the file system is read-only (sandbox.go). Every process the platform
// starts for an Instance (generation, seed, sidecar, run) runs as that
// Instance's identity, so a /proc that shows only the caller's own uid
// (hidepid=invisible, systemd's ProtectProc=invisible) hides every other
// tenant and the node's own processes while an Instance's processes still
// see each other: a run sees its app as `kubectl exec` would. The rest is
// private per process tree: System V IPC and POSIX message queues (an IPC
// namespace), /dev (a tmpfs holding only the harmless devices, with a
// /dev/shm and /dev/pts of its own), and the kernel's tunables and logs
// read-only or absent.

// devices are the nodes of a private /dev (systemd's PrivateDevices set):
// name, major, minor.
var devices = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
	{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// devLinks are the usual symlinks of /dev.
var devLinks = map[string]string{
	"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
	"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx", "core": "/proc/kcore",
}

// kernelTunables are bound read-only over the fresh /proc (systemd's
// ProtectKernelTunables list, where it exists).
var kernelTunables = []string{
	"/proc/sys", "/proc/sysrq-trigger", "/proc/latency_stats", "/proc/acpi",
	"/proc/timer_stats", "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq",
}

// kernelHidden are covered by an empty read-only file (systemd's
// ProtectKernelLogs and the raw memory views).
var kernelHidden = []string{"/proc/kmsg", "/proc/kcore", "/proc/kallsyms"}

// homes are covered by an empty read-only tmpfs (systemd's
// ProtectHome=tmpfs): the node's users' files are no tenant's business.
var homes = []string{"/home", "/root", "/run/user"}

// world gives the calling thread an IPC namespace of its own and covers
// /dev and /proc with private instances. It runs inside the sandbox's
// mount namespace, after every inherited mount was made read-only, so the
// node's /dev and /proc lie read-only beneath.
func world(writable []string) error {
	if err := hideHomes(writable); err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("unshare the IPC namespace: %w", err)
	}
	if err := privateDev(); err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	if err := privateProc(); err != nil {
		return fmt.Errorf("private /proc: %w", err)
	}
	return nil
}

// hideHomes covers each of homes that exists and holds none of writable.
func hideHomes(writable []string) error {
	for _, h := range homes {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() || holdsAny(h, writable) {
			continue
		}
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "mode=755,size=4k"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	return nil
}

func holdsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if under(p, []string{dir}) {
			return true
		}
	}
	return false
}

// privateDev mounts a tmpfs on /dev with the harmless device nodes, the
// usual links, a private /dev/shm, /dev/mqueue (this IPC namespace's) and
// /dev/pts (a new devpts instance, for a run's terminal). sandbox makes
// the tmpfs itself read-only once the writable trees are in place.
func privateDev() error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return err
	}
	for _, d := range devices {
		p := filepath.Join("/dev", d.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		if err := unix.Chmod(p, 0o666); err != nil { // past the umask
			return err
		}
	}
	for name, target := range devLinks {
		if err := os.Symlink(target, filepath.Join("/dev", name)); err != nil {
			return err
		}
	}
	// devpts holds nothing but terminals, which must open: it alone is
	// not nodev (as systemd's PrivateDevices mounts it).
	nodev := uintptr(unix.MS_NODEV)
	subs := []struct {
		dir, fs, opts string
		flags         uintptr
	}{
		{"/dev/shm", "tmpfs", "mode=1777", nodev},
		{"/dev/mqueue", "mqueue", "", nodev},
		{"/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=620", 0},
	}
	for _, s := range subs {
		if err := os.Mkdir(s.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(s.fs, s.dir, s.fs, unix.MS_NOSUID|unix.MS_NOEXEC|s.flags, s.opts); err != nil {
			return fmt.Errorf("mount %s: %w", s.dir, err)
		}
	}
	return nil
}

// privateProc mounts a fresh procfs on /proc that shows each process only
// what its own uid owns, then binds the kernel's tunables read-only over
// it and hides its logs and memory views.
func privateProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return err
	}
	for _, p := range kernelTunables {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := setReadOnly(p, true); err != nil {
			return err
		}
	}
	for _, p := range kernelHidden {
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("hide %s: %w", p, err)
		}
		if err := setReadOnly(p, false); err != nil {
			return err
		}
	}
	return nil
}

// setReadOnly makes the mount at path read-only (and everything below it
// with recursive), never following a symlink.
func setReadOnly(path string, recursive bool) error {
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, path, uint(flags), &ro); err != nil {
		return fmt.Errorf("make %s read-only: %w", path, err)
	}
	return nil
}
