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

func (u Users) dir() string {
	if u.Dir == "" {
		return "/etc"
	}
	return u.Dir
}

// Lookup returns the credential of the user called name: its uid,
// primary gid and the groups that list it as a member.
func (u Users) Lookup(name string) (Credential, error) {
	passwd, err := ReadColonFile(filepath.Join(u.dir(), "passwd"))
	if err != nil {
		return Credential{}, err
	}
	for _, f := range passwd {
		if len(f) < 4 || f[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return Credential{}, fmt.Errorf("user %s: malformed passwd entry", name)
		}
		c := Credential{UID: uid, GID: gid, User: name}
		if c.Groups, err = u.memberOf(name, gid); err != nil {
			return Credential{}, err
		}
		return c, nil
	}
	return Credential{}, fmt.Errorf("%w: %s is not in %s", ErrUnknownUser, name, filepath.Join(u.dir(), "passwd"))
}

// memberOf lists the gids whose group lists name as a member, primary
// first (what initgroups(3) gives).
func (u Users) memberOf(name string, primary int) ([]int, error) {
	groups, err := ReadColonFile(filepath.Join(u.dir(), "group"))
	if err != nil {
		return nil, err
	}
	gids := []int{primary}
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
				gids = append(gids, gid)
				break
			}
		}
	}
	return gids, nil
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
