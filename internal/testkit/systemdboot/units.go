package systemdboot

import (
	"fmt"
	"os"
	"path/filepath"
)

// bootTarget is the unit systemd is told to start; it pulls in dbus only.
const bootTarget = "systemdboot.target"

// stubTargets are the targets systemd reaches for on its own. Empty stubs
// stand in for the machine's, so none of the machine's units (databases,
// udev, tmpfiles) is started against the shared root.
var stubTargets = []string{
	"sysinit", "basic", "sockets", "timers", "paths", "slices",
	"local-fs", "multi-user", "shutdown", "default",
}

// dbusUnits are copied from the machine so the namespace gets the
// distribution's own bus daemon setup.
var dbusUnits = []string{"dbus.socket", "dbus.service"}

// dbusUnitDirs are searched in order for dbusUnits.
var dbusUnitDirs = []string{"/lib/systemd/system", "/usr/lib/systemd/system"}

// writeUnits writes the stub targets, the boot target and copies of the
// dbus units into dir, which the script copies onto the namespace's /run.
func writeUnits(dir string) error {
	for _, t := range stubTargets {
		body := fmt.Sprintf("[Unit]\nDescription=systemdboot stub %s.target\n", t)
		if err := os.WriteFile(filepath.Join(dir, t+".target"), []byte(body), 0o644); err != nil {
			return err
		}
	}
	boot := "[Unit]\nDescription=systemdboot: dbus only\nWants=dbus.socket dbus.service\n"
	if err := os.WriteFile(filepath.Join(dir, bootTarget), []byte(boot), 0o644); err != nil {
		return err
	}
	for _, u := range dbusUnits {
		body, err := readFirst(dbusUnitDirs, u)
		if err != nil {
			return fmt.Errorf("systemdboot: %s (is the dbus package installed?): %w", u, err)
		}
		if err := os.WriteFile(filepath.Join(dir, u), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func readFirst(dirs []string, name string) ([]byte, error) {
	var err error
	for _, d := range dirs {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(d, name)); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// outerScript runs on the host side: it moves its own process into the
// system's cgroups (so the cgroup namespace is rooted there) and becomes
// unshare(1), whose child is the namespace's PID 1. --kill-child SIGKILLs
// that child when unshare dies, and unshare itself gets the parent-death
// signal from the Go side, so a crashed test leaves nothing running.
const outerScript = `set -eu
for p in $SDB_CGROUP_PROCS; do echo $$ > "$p"; done
exec unshare --cgroup --pid --fork --kill-child --mount --uts --ipc \
	--propagation private --mount-proc /bin/sh "$SDB_INNER" "$@"
`

// innerScript runs as PID 1 of the new namespaces and execs systemd.
// Read-only /proc/sys, /sys and / keep systemd from raising the machine's
// sysctls or writing to the shared root; the arguments are directories
// that stay writable (bound onto themselves before / turns read-only).
// The script keeps running from its open file once /tmp is covered.
const innerScript = `set -eu
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount -t tmpfs -o mode=0755 systemdboot-cgroup /sys/fs/cgroup
for h in $SDB_HIERARCHIES; do
	dir=${h%%:*}; rest=${h#*:}; fstype=${rest%%:*}; opts=${rest#*:}
	mkdir /sys/fs/cgroup/"$dir"
	if [ "$fstype" = cgroup2 ]; then
		mount -t cgroup2 cgroup2 /sys/fs/cgroup/"$dir"
	else
		mount -t cgroup -o "$opts" cgroup /sys/fs/cgroup/"$dir"
	fi
done
mount -o remount,bind,ro /sys
mount -t tmpfs -o mode=0755 systemdboot-run /run
mkdir -p /run/systemdboot/units /run/systemdboot/empty
cp "$SDB_UNITS"/* /run/systemdboot/units/
# systemd as PID 1 writes to /dev/console: keep that off the machine's.
: > /run/systemdboot/console
mount --bind /run/systemdboot/console /dev/console
# Private /tmp and /var/tmp: what units leave there (PrivateTmp dirs)
# goes with the namespace instead of piling up on the machine.
mount -t tmpfs -o mode=1777 systemdboot-tmp /tmp
mount -t tmpfs -o mode=1777 systemdboot-vartmp /var/tmp
for d in "$@"; do mount --bind "$d" "$d"; done
mount -o remount,bind,ro /
export SYSTEMD_UNIT_PATH=/run/systemdboot/units
export SYSTEMD_GENERATOR_PATH=/run/systemdboot/empty
export SYSTEMD_ENVIRONMENT_GENERATOR_PATH=/run/systemdboot/empty
unset SDB_HIERARCHIES SDB_UNITS SDB_CGROUP_PROCS SDB_INNER
exec /lib/systemd/systemd --system --unit=` + bootTarget + `
`
