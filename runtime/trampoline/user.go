package trampoline

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
)

// drop makes the calling thread id, with no capability left: the bounding
// set emptied first (while CAP_SETPCAP is still held), then groups, gid
// and uid (set on every thread), then whatever capability sets remain on
// this thread cleared. The thread must be locked: exec happens from it.
func drop(id launch.Identity) error {
	if err := emptyBoundingSet(); err != nil {
		return err
	}
	if err := setIDs(id); err != nil {
		return err
	}
	if err := clearCapabilities(); err != nil {
		return err
	}
	if id.UID != 0 && unix.Setuid(0) == nil {
		return fmt.Errorf("uid 0 could be regained after dropping to %d", id.UID)
	}
	return nil
}

func emptyBoundingSet() error {
	for c := 0; ; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if err == unix.EINVAL && c > 0 {
				return nil // past the kernel's last capability
			}
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
}

func setIDs(id launch.Identity) error {
	groups := id.Groups
	if len(groups) == 0 {
		groups = []int{id.GID}
	}
	if err := unix.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := unix.Setgid(id.GID); err != nil {
		return fmt.Errorf("setgid %d: %w", id.GID, err)
	}
	if err := unix.Setuid(id.UID); err != nil {
		return fmt.Errorf("setuid %d: %w", id.UID, err)
	}
	return nil
}

// clearCapabilities empties this thread's capability sets and sets
// no-new-privileges, so nothing is regained across exec.
func clearCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no new privileges: %w", err)
	}
	return nil
}
