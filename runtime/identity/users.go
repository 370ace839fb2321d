package identity

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Users is the node's user database: passwd and group in Dir ("/etc" on a
// host; the host's /etc mounted elsewhere in the DaemonSet's container,
// whose own /etc is not the node's). It is read as files, not through
// NSS: the agent's image has no NSS modules, and the apps run on the host.
type Users struct{ Dir string }

// Account is a passwd entry with the groups that list it as a member.
type Account struct {
	Name     string
	UID, GID int
	// Member are the groups listing the account, its primary one aside.
	Member []Group
}

// Group is a group of the node.
type Group struct {
	Name string
	GID  int
}

func (u Users) dir() string {
	if u.Dir == "" {
		return "/etc"
	}
	return u.Dir
}

// Lookup returns the account called name: its uid, primary gid and the
// groups that list it as a member (what initgroups(3) would give).
func (u Users) Lookup(name string) (Account, error) {
	passwd, err := ReadColonFile(filepath.Join(u.dir(), "passwd"))
	if err != nil {
		return Account{}, err
	}
	for _, f := range passwd {
		if len(f) < 4 || f[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return Account{}, fmt.Errorf("user %s: malformed passwd entry", name)
		}
		a := Account{Name: name, UID: uid, GID: gid}
		if a.Member, err = u.memberOf(name, gid); err != nil {
			return Account{}, err
		}
		return a, nil
	}
	return Account{}, fmt.Errorf("%w: %s is not in %s", ErrUnknownUser, name, filepath.Join(u.dir(), "passwd"))
}

// Groups returns the node's groups by name.
func (u Users) Groups() (map[string]int, error) {
	lines, err := ReadColonFile(filepath.Join(u.dir(), "group"))
	if err != nil {
		return nil, err
	}
	byName := make(map[string]int, len(lines))
	for _, f := range lines {
		if len(f) < 3 {
			continue
		}
		if gid, err := strconv.Atoi(f[2]); err == nil {
			byName[f[0]] = gid
		}
	}
	return byName, nil
}

// memberOf lists the groups other than primary that list name as a
// member, in the group file's order.
func (u Users) memberOf(name string, primary int) ([]Group, error) {
	groups, err := ReadColonFile(filepath.Join(u.dir(), "group"))
	if err != nil {
		return nil, err
	}
	var member []Group
	for _, f := range groups {
		if len(f) < 4 {
			continue
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil || gid == primary {
			continue
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == name {
				member = append(member, Group{Name: f[0], GID: gid})
				break
			}
		}
	}
	return member, nil
}

// ReadColonFile reads a passwd(5)-style file as its lines' fields;
// comments and blank lines are skipped.
func ReadColonFile(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the file
	}
	var lines [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		lines = append(lines, strings.Split(line, ":"))
	}
	return lines, sc.Err()
}
