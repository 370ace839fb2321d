package identity

import (
	"fmt"
	"slices"
)

// Grant is an administrator's word on the named user one Instance may
// run as: the user, the supplementary groups of that user it may keep,
// and whether the user may be uid 0. The zero Grant allows no named user
// (an Instance without one always gets its own uid).
type Grant struct {
	// User is the granted user's name; "" grants none.
	User string
	// Groups are the names of the groups the user keeps beside its
	// primary one; the user's other groups are dropped.
	Groups []string
	// Root lets the user be uid 0 (a grant of the user root).
	Root bool
	// CloudMetadata lets the user's processes reach the cloud metadata
	// service when the Instance asks.
	CloudMetadata bool
}

// never says why an id is given to no Instance, whatever a grant says;
// "" when it may be granted. The socket group reaches every Instance's
// sockets and run dirs; an id of the reserved range is (or will be)
// another Instance's own; gid 0 reaches what root's group owns. rootUID
// says the id is the primary gid of a granted uid 0, which keeps gid 0:
// uid 0 already owns nearly all gid 0 can reach, and root's files stay
// root's whatever its gid, so refusing it protects nothing.
func (s *Store) never(id int, rootUID bool) string {
	switch {
	case id == 0 && !rootUID:
		return "gid 0 reaches what root's group owns on the node"
	case id == s.SocketGID:
		return "it is the socket group (--socket-group), which reaches every Instance's sockets"
	case s.Range.Contains(id):
		return fmt.Sprintf("it is in the range reserved for Instances' own ids (--app-ids %s)", s.Range)
	}
	return ""
}

// restrict turns a granted account into the credential it runs as: its
// uid and primary gid, with only the supplementary groups g lists. An id
// no grant can give refuses the whole account (ErrNeverGranted), even
// when g lists it.
func (s *Store) restrict(a Account, g Grant) (Credential, error) {
	if a.UID == 0 && !g.Root {
		return Credential{}, fmt.Errorf("user %s: %w", a.Name, ErrRootRefused)
	}
	if s.Range.Contains(a.UID) {
		return Credential{}, fmt.Errorf("user %s: uid %d %w: it is in the range reserved for Instances' own ids (--app-ids %s)",
			a.Name, a.UID, ErrNeverGranted, s.Range)
	}
	if why := s.never(a.GID, a.UID == 0); why != "" {
		return Credential{}, fmt.Errorf("user %s: primary group %d %w: %s", a.Name, a.GID, ErrNeverGranted, why)
	}
	if err := s.refuseListed(g.Groups); err != nil {
		return Credential{}, fmt.Errorf("user %s: %w", a.Name, err)
	}
	c := Credential{UID: a.UID, GID: a.GID, Groups: []int{a.GID}, User: a.Name}
	for _, m := range a.Member {
		if slices.Contains(g.Groups, m.Name) {
			c.Groups = append(c.Groups, m.GID)
		}
	}
	return c, nil
}

// refuseListed refuses a grant listing a group no grant can give. A
// listed group the node does not have allows nothing, and is no error.
func (s *Store) refuseListed(names []string) error {
	if len(names) == 0 {
		return nil
	}
	gids, err := s.Users.Groups()
	if err != nil {
		return err
	}
	for _, n := range names {
		gid, ok := gids[n]
		if !ok {
			continue
		}
		if why := s.never(gid, false); why != "" {
			return fmt.Errorf("granted group %s (gid %d) %w: %s", n, gid, ErrNeverGranted, why)
		}
	}
	return nil
}
