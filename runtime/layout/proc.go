package layout

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/coreos/go-systemd/v22/unit"
)

// Proc is one process slot of an instance: a generation unit (role run,
// generation n ≥ 1) or a role unit (seed, sidecar, cmd; generation 0).
// Every per-process name (launch file, exit records, log sockets, unit)
// comes from here, so a generation's names never collide with a role's.
type Proc struct {
	inst Instance
	role Role
	gen  uint64
}

// Proc validates the (role, generation) pair: the run role always belongs
// to a generation; the other roles never do (a cmd runs against a
// generation, but its own names are not keyed by it).
func (i Instance) Proc(r Role, gen uint64) (Proc, error) {
	switch {
	case !r.Valid():
		return Proc{}, fmt.Errorf("unknown role %q", r)
	case r == RoleRun && gen == 0:
		return Proc{}, fmt.Errorf("role run: %w", ErrNotAGeneration)
	case r != RoleRun && gen != 0:
		return Proc{}, fmt.Errorf("role %s is not a generation unit (got generation %d)", r, gen)
	}
	return Proc{inst: i, role: r, gen: gen}, nil
}

// Generation is Proc(RoleRun, n).
func (i Instance) Generation(n uint64) (Proc, error) { return i.Proc(RoleRun, n) }

func (p Proc) Instance() Instance { return p.inst }
func (p Proc) Role() Role         { return p.role }

// Generation is the generation number, 0 for a role unit.
func (p Proc) Generation() uint64 { return p.gen }

// key is the per-process part of file names: "gen.<n>" or the role.
func (p Proc) key() string {
	if p.gen != 0 {
		return "gen." + strconv.FormatUint(p.gen, 10)
	}
	return string(p.role)
}

// LaunchFile is the launch file's name beneath the data dir:
// launch.gen.<n>.json or launch.<role>.json.
func (p Proc) LaunchFile() string { return "launch." + p.key() + ".json" }

// ExitPrefix starts the names of this process's exit records in ExitDir:
// exit.gen.<n>. or exit.<role>.. The trailing dot keeps g1 from matching
// g10's records.
func (p Proc) ExitPrefix() string { return "exit." + p.key() + "." }

// LogSocket is where the process's stdout goes, and its stderr too except
// for cmd (see ErrLogSocket): g<n>.sock or <role>.sock in LogDir.
func (p Proc) LogSocket() string {
	if p.role == RoleCmd {
		return filepath.Join(p.inst.LogDir(), "cmd.out.sock")
	}
	if p.gen != 0 {
		return filepath.Join(p.inst.LogDir(), "g"+strconv.FormatUint(p.gen, 10)+".sock")
	}
	return filepath.Join(p.inst.LogDir(), string(p.role)+".sock")
}

// ErrLogSocket is the cmd role's separate stderr socket; "" for the other
// roles, whose stderr shares LogSocket.
func (p Proc) ErrLogSocket() string {
	if p.role != RoleCmd {
		return ""
	}
	return filepath.Join(p.inst.LogDir(), "cmd.err.sock")
}

// UnitPrefix starts every systemd unit and slice name unitlet creates.
const UnitPrefix = "unitlet"

// unitNameMax is systemd's limit on a unit name (UNIT_NAME_MAX - 1).
const unitNameMax = 255

// SliceName is the instance's slice, unitlet-<ns>-<name>.slice with each
// part escaped as systemd does (a "-" inside ns or name becomes \x2d, since
// a bare "-" in a slice name means nesting). When the escaped name would
// exceed systemd's length limit the instance part becomes its ShortID.
func (i Instance) SliceName() string { return i.unitStem() + ".slice" }

func (i Instance) unitStem() string {
	// The longest unit suffix is "-g<20 digits>.service"; deciding on the
	// worst case keeps the slice and all units of an instance consistent.
	stem := UnitPrefix + "-" + unit.UnitNameEscape(i.namespace) + "-" + unit.UnitNameEscape(i.name)
	if len(stem)+len("-g18446744073709551615.service") > unitNameMax {
		stem = UnitPrefix + "-" + i.ShortID()
	}
	return stem
}

// UnitName is the process's transient service: unitlet-<ns>-<name>-g<n>.service
// for a generation, unitlet-<ns>-<name>-<role>.service for a role unit.
func (p Proc) UnitName() string {
	if p.gen != 0 {
		return p.inst.unitStem() + "-g" + strconv.FormatUint(p.gen, 10) + ".service"
	}
	return p.inst.unitStem() + "-" + string(p.role) + ".service"
}
