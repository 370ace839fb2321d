package join

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/instancefs"
)

// DefaultBusAddress is the system bus a systemd backend talks through.
const DefaultBusAddress = "unix:path=/run/dbus/system_bus_socket"

// RootMode is the mode Prepare gives a state or run root it creates:
// only the agent writes; others may pass through to the directory the
// agent gave them (an app user its data dir, a proxy in the socket group
// its run dir) but not list the others.
const RootMode = 0o711

// busTimeout bounds the bus check, so a hung bus fails the check instead
// of stalling the agent's re-checks.
const busTimeout = 5 * time.Second

// v1Hierarchies are the v1 controllers the cgroup manager needs writable
// on a v1 or hybrid host: freezer and pids for placement and kill, memory
// and cpu for the tier.
var v1Hierarchies = []string{"freezer", "pids", "memory", "cpu"}

// Guard is what the checks look at, from the agent's flags.
type Guard struct {
	// CgroupMountRoot is where cgroups are mounted ("" is /sys/fs/cgroup).
	CgroupMountRoot string
	// CgroupRoot is the delegated cgroup, relative to each hierarchy.
	CgroupRoot string
	StateRoot  string
	RunRoot    string
	// SocketGroup names the group that owns run dirs and sockets.
	SocketGroup string
	// Groups is the node's group database, where SocketGroup is found.
	Groups GroupDB
	// Systemd: the unit backend is systemd, so its bus must answer.
	Systemd bool
	// BusAddress is the D-Bus address of systemd ("" is DefaultBusAddress).
	BusAddress string
	// UID is the owner the roots must have (the agent's own).
	UID int
}

// Check runs every check and returns them in a fixed order. It changes
// nothing on the node.
func (g Guard) Check(ctx context.Context) []Check {
	checks := []Check{
		g.checkCgroupRoot(),
		g.checkRoot(CheckStateRoot, g.StateRoot),
		g.checkRoot(CheckRunRoot, g.RunRoot),
		g.checkSocketGroup(),
		checkOpenat2(),
	}
	if g.Systemd {
		checks = append(checks, g.checkBus(ctx))
	}
	return checks
}

// cgroupDirs are the delegated root's directories, one per hierarchy the
// cgroup manager writes.
func (g Guard) cgroupDirs() (cgroups.Mode, []string, error) {
	mount := g.CgroupMountRoot
	if mount == "" {
		mount = cgroups.DefaultMountRoot
	}
	mode, err := cgroups.DetectMode(mount)
	if err != nil {
		return mode, nil, err
	}
	if g.CgroupRoot == "" || filepath.IsAbs(g.CgroupRoot) || !filepath.IsLocal(g.CgroupRoot) {
		return mode, nil, fmt.Errorf("cgroup root %q must be a relative path below the hierarchy", g.CgroupRoot)
	}
	var dirs []string
	if mode == cgroups.ModeV2 {
		return mode, []string{filepath.Join(mount, g.CgroupRoot)}, nil
	}
	for _, h := range v1Hierarchies {
		dirs = append(dirs, filepath.Join(mount, h, g.CgroupRoot))
	}
	if mode == cgroups.ModeHybrid {
		dirs = append(dirs, filepath.Join(mount, "unified", g.CgroupRoot))
	}
	return mode, dirs, nil
}

// CgroupDirs are the delegated cgroup root's directories, one in each
// hierarchy the cgroup manager writes; Prepare creates them.
func (g Guard) CgroupDirs() ([]string, error) {
	_, dirs, err := g.cgroupDirs()
	return dirs, err
}

func (g Guard) checkCgroupRoot() Check {
	mode, dirs, err := g.cgroupDirs()
	if err != nil {
		return fail(CheckCgroupRoot, err)
	}
	for _, d := range dirs {
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return fail(CheckCgroupRoot, fmt.Errorf("%s (%s): %w", d, mode, err))
		}
	}
	return pass(CheckCgroupRoot, "%s: %d hierarchies writable at %s", mode, len(dirs), g.CgroupRoot)
}

// checkRoot requires a real directory (no symlink on the way: instancefs
// refuses to resolve through one) owned by the agent, writable by no one
// else, and passable by others.
func (g Guard) checkRoot(name, dir string) Check {
	if !filepath.IsAbs(dir) {
		return fail(name, fmt.Errorf("%q is not an absolute path", dir))
	}
	d, err := instancefs.OpenDir(dir)
	if err != nil {
		return fail(name, err)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return fail(name, fmt.Errorf("stat %s: %w", dir, err))
	}
	perm := st.Mode & 0o7777
	switch {
	case int(st.Uid) != g.UID:
		return fail(name, fmt.Errorf("%s is owned by uid %d, want %d", dir, st.Uid, g.UID))
	case perm&0o022 != 0:
		return fail(name, fmt.Errorf("%s has mode %04o: group or others may write it", dir, perm))
	case perm&0o001 == 0:
		return fail(name, fmt.Errorf("%s has mode %04o: others cannot pass through to their own directory", dir, perm))
	}
	return pass(name, "%s owned by uid %d, mode %04o", dir, st.Uid, perm)
}

func (g Guard) checkSocketGroup() Check {
	gid, err := g.Groups.Resolve(g.SocketGroup)
	if err != nil {
		return fail(CheckSocketGroup, err)
	}
	return pass(CheckSocketGroup, "group %s is gid %d", g.SocketGroup, gid)
}

// checkOpenat2 opens / the way every tenant path is opened: a kernel
// without openat2 refuses it with instancefs.ErrNoOpenat2.
func checkOpenat2() Check {
	d, err := instancefs.OpenDir("/")
	if err != nil {
		return fail(CheckOpenat2, err)
	}
	d.Close()
	return pass(CheckOpenat2, "openat2 with RESOLVE_NO_SYMLINKS works")
}

// checkBus asks systemd for its version over the bus, as the backend
// would connect.
func (g Guard) checkBus(ctx context.Context) Check {
	addr := g.BusAddress
	if addr == "" {
		addr = DefaultBusAddress
	}
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	version, err := systemdVersion(ctx, addr)
	if err != nil {
		return fail(CheckSystemdBus, fmt.Errorf("%s: %w", addr, err))
	}
	return pass(CheckSystemdBus, "systemd %s answers on %s", version, addr)
}

func systemdVersion(ctx context.Context, addr string) (string, error) {
	c, err := godbus.Dial(addr, godbus.WithContext(ctx))
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	if err := c.Hello(); err != nil {
		return "", fmt.Errorf("hello: %w", err)
	}
	var v godbus.Variant
	err = c.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").
		CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, "org.freedesktop.systemd1.Manager", "Version").
		Store(&v)
	if err != nil {
		return "", fmt.Errorf("systemd manager: %w", err)
	}
	s, _ := v.Value().(string)
	return s, nil
}

// CgroupMode is how cgroups are mounted below the guard's mount root
// ("v1", "hybrid", "v2", or "none" when there is no cgroup file system).
func (g Guard) CgroupMode() string {
	mode, _, _ := g.cgroupDirs()
	return mode.String()
}
