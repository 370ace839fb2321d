package identity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors a caller turns into a condition.
var (
	// ErrNotGranted: the template names a user no administrator granted
	// to the Instance's namespace on this node. Nothing of the node's
	// user database was read: the error says nothing of the account.
	ErrNotGranted = errors.New("not granted to this namespace on this node")
	// ErrRootRefused: the granted user is uid 0, and the grant is not one
	// of the user root.
	ErrRootRefused = errors.New("is root (uid 0), which only a grant of the user root allows")
	// ErrNeverGranted: the user's uid or one of its groups is one that no
	// grant gives (gid 0, the socket group, an id of the reserved range).
	ErrNeverGranted = errors.New("is never granted to an Instance")
	// ErrUnknownUser: the template names a user the node does not have.
	ErrUnknownUser = errors.New("no such user on the node")
	// ErrRangeFull: every uid of the reserved range is taken.
	ErrRangeFull = errors.New("no free uid in the range reserved for Instances")
)

// Credential is who a process runs as; the launch file stores it as is.
type Credential struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Groups are the supplementary groups (the primary gid included).
	Groups []int `json:"groups,omitempty"`
	// User is the template's user name; "" for an allocated identity.
	User string `json:"user,omitempty"`
}

// Range is the uids (and equal gids) allocated to Instances: First to
// First+Size-1. They must belong to no user or group of the node.
type Range struct{ First, Size int }

// DefaultRange sits above the ranges systemd documents for system,
// regular, dynamic and container users (up to 1879048191), so it meets
// neither a user of the node nor a container's.
var DefaultRange = Range{First: 1879048192, Size: 65536}

// Contains reports whether uid is in r.
func (r Range) Contains(uid int) bool { return uid >= r.First && uid < r.First+r.Size }

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.First+r.Size-1) }

// ParseRange reads FIRST-LAST (inclusive), the form of --app-ids.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first <= 0 || last < first {
		return Range{}, fmt.Errorf("uid range %q: want FIRST-LAST with 0 < FIRST <= LAST", s)
	}
	return Range{First: first, Size: last - first + 1}, nil
}
