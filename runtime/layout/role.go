package layout

import (
	"fmt"
)

// Role is what a process does for an Instance: a generation's app, the
// one-shot seed, the co-spawned sidecars, or a one-off command started
// against a generation by `kubectl unitlet run`. The values are stored
// (unit names, record files): the app's role reads "run" and a command's
// "cmd", the words they had first.
type Role string

const (
	RoleApp     Role = "run"
	RoleSeed    Role = "seed"
	RoleSidecar Role = "sidecar"
	RoleCommand Role = "cmd"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleApp, RoleSeed, RoleSidecar, RoleCommand:
		return true
	}
	return false
}

// ErrNotAGeneration is returned for generation number 0: generations are
// numbered from 1.
var ErrNotAGeneration = fmt.Errorf("not a generation number (numbers start at 1)")
