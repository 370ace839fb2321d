package layout

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// CgroupPrefix starts the name of every instance parent cgroup unitlet
// creates, so a sweep can find its own leftovers and nothing else.
const CgroupPrefix = "unitlet-"

// InstanceCgroup is the instance parent cgroup ("generation parent"),
// relative to the cgroup root the agent was given (e.g. "unitlet").
// It holds no processes itself, only the children below. The namespace
// (a DNS label) and the name (a DNS subdomain) are joined by '_', which
// neither may hold, so the name parses back unambiguously. A name longer
// than a path component allows becomes "_" and the ShortID: its empty
// namespace part is no natural name's, and ParseInstanceCgroup refuses it.
func InstanceCgroup(root, namespace, name string) string {
	base := CgroupPrefix + namespace + "_" + name
	if len(base) > nameMax {
		base = CgroupPrefix + "_" + shortID(namespace, name)
	}
	return path.Join(root, base)
}

// nameMax is the longest path component (NAME_MAX).
const nameMax = 255

// ParseInstanceCgroup is the inverse of InstanceCgroup's last element, for
// re-discovery after an agent restart.
func ParseInstanceCgroup(base string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(base, CgroupPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, "_")
	return namespace, name, ok && namespace != "" && name != ""
}

// GenerationCgroup is the child of the instance parent that generation n
// runs in, with the tier's own limits.
func GenerationCgroup(n int64) (string, error) {
	if n <= 0 {
		return "", ErrNotAGeneration
	}
	return fmt.Sprintf("g%d", n), nil
}

// RoleCgroup is the child the seed runs in (role-seed); it carries no
// limit of its own. A sidecar's child is SidecarCgroup, a run's RunCgroup.
func RoleCgroup(r Role) (string, error) {
	switch r {
	case RoleSeed:
		return "role-" + string(r), nil
	case RoleSidecar:
		return "", fmt.Errorf("role sidecar: %w", ErrBadSidecarName)
	case RoleCommand:
		return "", fmt.Errorf("role command: %w", ErrBadCommandName)
	}
	return "", fmt.Errorf("role %q has no cgroup of its own", r)
}

// sidecarCgroupPrefix starts every sidecar's child.
const sidecarCgroupPrefix = "role-sidecar-"

// SidecarCgroup is the child the sidecar called name runs in,
// role-sidecar-<name>, with no limit of its own.
func SidecarCgroup(name string) (string, error) {
	if len(name) > SidecarNameMax || !isDNSLabel(name) {
		return "", fmt.Errorf("%w: %q", ErrBadSidecarName, name)
	}
	return sidecarCgroupPrefix + name, nil
}

// commandCgroupPrefix starts every run's child.
const commandCgroupPrefix = "role-cmd-"

// CommandCgroup is the child the command called name runs in,
// role-cmd-<name>, with no limit of its own: the Instance's parent
// bounds it with the app.
func CommandCgroup(name string) (string, error) {
	if len(name) > CommandNameMax || !isDNSLabel(name) {
		return "", fmt.Errorf("%w: %q", ErrBadCommandName, name)
	}
	return commandCgroupPrefix + name, nil
}

// IsRoleCgroup reports whether child is a role child layout derives
// (role-seed, role-sidecar-<name> or role-cmd-<name>).
func IsRoleCgroup(child string) bool {
	if seed, _ := RoleCgroup(RoleSeed); child == seed {
		return true
	}
	if name, ok := strings.CutPrefix(child, sidecarCgroupPrefix); ok {
		_, err := SidecarCgroup(name)
		return err == nil
	}
	if name, ok := strings.CutPrefix(child, commandCgroupPrefix); ok {
		_, err := CommandCgroup(name)
		return err == nil
	}
	return false
}

// ParseGenerationCgroup is the inverse of GenerationCgroup, for re-discovery
// after an agent restart: ok is false for anything that is not g<n>, n ≥ 1.
func ParseGenerationCgroup(child string) (n int64, ok bool) {
	rest, found := strings.CutPrefix(child, "g")
	if !found || rest == "" || rest[0] == '0' {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(rest, 10, 64) // refuses what overflows
	return n, err == nil
}
