package layout

import (
	"fmt"
)

// Role is what a process does for an Instance. A generation's app runs in
// the run role; the others are the one-shot seed, the co-spawned sidecars
// and an operator's one-off command against a generation.
type Role string

const (
	RoleRun     Role = "run"
	RoleSeed    Role = "seed"
	RoleSidecar Role = "sidecar"
	RoleCmd     Role = "cmd"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleRun, RoleSeed, RoleSidecar, RoleCmd:
		return true
	}
	return false
}

// ErrNotAGeneration is returned for generation number 0: generations are
// numbered from 1.
var ErrNotAGeneration = fmt.Errorf("generation 0 is not a generation (numbers start at 1)")
