package join

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// LookupGroup resolves the socket group: a numeric gid is taken as it is
// (a node whose group database the agent cannot read, as in a container,
// is configured that way); a name is looked up in the node's database.
func LookupGroup(spec string) (int, error) {
	if spec == "" {
		return -1, errors.New("no socket group configured (--socket-group)")
	}
	if gid, err := strconv.Atoi(spec); err == nil {
		if gid < 0 {
			return -1, fmt.Errorf("socket group gid %d is negative", gid)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(spec)
	if err != nil {
		return -1, fmt.Errorf("%w: create it on the node (groupadd --system %s), or pass --socket-group=<gid>", err, spec)
	}
	return strconv.Atoi(g.Gid)
}

// groupadd is the tool that creates a system group; a variable so a test
// can point it elsewhere.
var groupadd = "groupadd"

// ensureGroup creates a named socket group that does not exist yet, as a
// system group, with the node's own tool (it keeps the group database's
// locks and shadow file right). A numeric gid or an existing group is left
// as it is.
func ensureGroup(spec string) error {
	if _, err := LookupGroup(spec); err == nil || spec == "" {
		return nil
	}
	if _, err := strconv.Atoi(spec); err == nil {
		return nil
	}
	path, err := exec.LookPath(groupadd)
	if err != nil {
		return fmt.Errorf("create socket group %s: %w: install the passwd package, create the group, or pass --socket-group=<gid>", spec, err)
	}
	out, err := exec.Command(path, "--system", spec).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create socket group %s: %s: %w", spec, strings.TrimSpace(string(out)), err)
	}
	return nil
}
