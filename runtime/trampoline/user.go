package trampoline

import (
	"fmt"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// credential is who the process becomes before exec.
type credential struct {
	uid, gid int
	groups   []int
}

// lookupUser resolves a user name, or a numeric uid, to its uid, primary
// gid and supplementary groups.
func lookupUser(name string) (*credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var uerr error
		if u, uerr = user.LookupId(name); uerr != nil {
			return nil, err
		}
	}
	c := &credential{}
	if c.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("uid %q: %w", u.Uid, err)
	}
	if c.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("gid %q: %w", u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	for _, id := range ids {
		g, err := strconv.Atoi(id)
		if err != nil {
			return nil, fmt.Errorf("group %q: %w", id, err)
		}
		c.groups = append(c.groups, g)
	}
	return c, nil
}

// drop sets groups, then gid, then uid: once the uid is gone the others
// can no longer be changed. It verifies the uid cannot be regained.
func (c *credential) drop() error {
	if err := unix.Setgroups(c.groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := unix.Setgid(c.gid); err != nil {
		return fmt.Errorf("setgid %d: %w", c.gid, err)
	}
	if err := unix.Setuid(c.uid); err != nil {
		return fmt.Errorf("setuid %d: %w", c.uid, err)
	}
	if c.uid != 0 && unix.Setuid(0) == nil {
		return fmt.Errorf("uid 0 could be regained after dropping to %d", c.uid)
	}
	return nil
}
