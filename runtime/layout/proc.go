package layout

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// Proc is one process slot of an instance: a generation unit (role run,
// generation n ≥ 1) or a role unit (seed, sidecar, cmd; generation 0).
// Every per-process name (launch file, exit records, log sockets, unit)
// comes from here, so a generation's names never collide with a role's.
type Proc struct {
	inst    Instance
	role    Role
	gen     uint64
	sidecar string // the sidecar's name, role sidecar only
}

// Proc validates the (role, generation) pair: the run role always belongs
// to a generation; the other roles never do (a cmd runs against a
// generation, but its own names are not keyed by it). A sidecar needs its
// name: use Sidecar.
func (i Instance) Proc(r Role, gen uint64) (Proc, error) {
	switch {
	case !r.Valid():
		return Proc{}, fmt.Errorf("unknown role %q", r)
	case r == RoleRun && gen == 0:
		return Proc{}, fmt.Errorf("role run: %w", ErrNotAGeneration)
	case r != RoleRun && gen != 0:
		return Proc{}, fmt.Errorf("role %s is not a generation unit (got generation %d)", r, gen)
	case r == RoleSidecar:
		return Proc{}, fmt.Errorf("role sidecar: %w", ErrBadSidecarName)
	}
	return Proc{inst: i, role: r, gen: gen}, nil
}

// SidecarNameMax bounds a sidecar's name so its log socket still fits
// sun_path (see longestSocketSuffix) and its unit name systemd's limit.
const SidecarNameMax = 32

// ErrBadSidecarName is returned for a sidecar name that is missing, not a
// DNS-1123 label, or longer than SidecarNameMax.
var ErrBadSidecarName = errors.New("sidecar name must be a DNS-1123 label of at most 32 characters")

// Sidecar is the slot of the sidecar called name: several sidecars of one
// Instance each get their own unit, files and cgroup child.
func (i Instance) Sidecar(name string) (Proc, error) {
	if len(name) > SidecarNameMax || !isDNSLabel(name) {
		return Proc{}, fmt.Errorf("%w: %q", ErrBadSidecarName, name)
	}
	return Proc{inst: i, role: RoleSidecar, sidecar: name}, nil
}

// Slot is Sidecar(sidecar) for role sidecar and Proc(r, gen) otherwise,
// for callers that carry the three parts (records, refs, parsed names);
// a sidecar name on another role is refused.
func (i Instance) Slot(r Role, gen uint64, sidecar string) (Proc, error) {
	if r == RoleSidecar {
		if gen != 0 {
			return Proc{}, fmt.Errorf("role sidecar is not a generation unit (got generation %d)", gen)
		}
		return i.Sidecar(sidecar)
	}
	if sidecar != "" {
		return Proc{}, fmt.Errorf("role %s has no sidecar name (got %q)", r, sidecar)
	}
	return i.Proc(r, gen)
}

// Generation is Proc(RoleRun, n).
func (i Instance) Generation(n uint64) (Proc, error) { return i.Proc(RoleRun, n) }

func (p Proc) Instance() Instance { return p.inst }
func (p Proc) Role() Role         { return p.role }

// SidecarName is the sidecar's name, "" for every other role.
func (p Proc) SidecarName() string { return p.sidecar }

// Generation is the generation number, 0 for a role unit.
func (p Proc) Generation() uint64 { return p.gen }

// key is the per-process part of file names: "gen.<n>", "sidecar.<name>"
// or the role. A sidecar name is a DNS label (no dot), so no key is a
// prefix of another up to the dot that follows it.
func (p Proc) key() string {
	switch {
	case p.gen != 0:
		return "gen." + strconv.FormatUint(p.gen, 10)
	case p.role == RoleSidecar:
		return string(p.role) + "." + p.sidecar
	}
	return string(p.role)
}

// LaunchFile is the launch file's name beneath the data dir:
// launch.gen.<n>.json, launch.sidecar.<name>.json or launch.<role>.json.
func (p Proc) LaunchFile() string { return "launch." + p.key() + ".json" }

// ExitPrefix starts the names of this process's exit records in ExitDir:
// exit.gen.<n>., exit.sidecar.<name>. or exit.<role>.. The trailing dot keeps g1 from matching
// g10's records.
func (p Proc) ExitPrefix() string { return "exit." + p.key() + "." }

// LogSocket is where the process's stdout goes, and its stderr too except
// for cmd (see ErrLogSocket): g<n>.sock, sc.<name>.sock or <role>.sock
// in LogDir. A sidecar's is short ("sc", not "sidecar") to leave sun_path
// room (see longestSocketSuffix).
func (p Proc) LogSocket() string {
	switch {
	case p.role == RoleCmd:
		return filepath.Join(p.inst.LogDir(), "cmd.out.sock")
	case p.gen != 0:
		return filepath.Join(p.inst.LogDir(), "g"+strconv.FormatUint(p.gen, 10)+".sock")
	case p.role == RoleSidecar:
		return filepath.Join(p.inst.LogDir(), sidecarLogSocketPrefix+p.sidecar+".sock")
	}
	return filepath.Join(p.inst.LogDir(), string(p.role)+".sock")
}

// LogFIFO is where the process's output goes when a service manager, not
// a shim, runs it (the systemd backend): a named pipe beside LogSocket
// (g<n>.fifo, sc.<name>.fifo, <role>.fifo). The app holds it open itself,
// so its output survives an agent restart and waits for the next agent
// in the pipe. "" for cmd, whose two streams stay on sockets.
func (p Proc) LogFIFO() string {
	if p.role == RoleCmd {
		return ""
	}
	return strings.TrimSuffix(p.LogSocket(), ".sock") + ".fifo"
}

// sidecarLogSocketPrefix starts a sidecar's log socket name; no role is
// called "sc", so it collides with no other slot's.
const sidecarLogSocketPrefix = "sc."

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
	// Deciding on the worst-case unit suffix keeps the slice and all
	// units of an instance consistent.
	stem := UnitPrefix + "-" + unit.UnitNameEscape(i.namespace) + "-" + unit.UnitNameEscape(i.name)
	if len(stem)+longestUnitSuffix > unitNameMax {
		stem = UnitPrefix + "-" + i.ShortID()
	}
	return stem
}

// HasUnit tells whether the service called name is one of the
// instance's: it starts with the stem all of them share. Every "-" inside
// a part is escaped, so no other instance's units share that prefix; only
// a namespace spelled like a ShortID could, and a caller that can parse
// the name checks the instance too.
func (i Instance) HasUnit(name string) bool {
	rest, ok := strings.CutPrefix(name, i.unitStem()+"-")
	return ok && strings.HasSuffix(rest, ".service")
}

// longestUnitSuffix is the longest unit suffix: a sidecar whose name is
// SidecarNameMax characters, every inner one a "-" (escaped to 4 bytes).
// It is longer than a generation's "-g<20 digits>.service".
var longestUnitSuffix = len("-sidecar-" + unit.UnitNameEscape("a"+strings.Repeat("-", SidecarNameMax-2)+"a") + ".service")

// UnitName is the process's transient service: unitlet-<ns>-<name>-g<n>.service
// for a generation, unitlet-<ns>-<name>-sidecar-<sidecar>.service for a
// sidecar, unitlet-<ns>-<name>-<role>.service for another role unit. Each
// part is escaped, so bare dashes separate them.
func (p Proc) UnitName() string {
	switch {
	case p.gen != 0:
		return p.inst.unitStem() + "-g" + strconv.FormatUint(p.gen, 10) + ".service"
	case p.role == RoleSidecar:
		return p.inst.unitStem() + "-" + string(p.role) + "-" + unit.UnitNameEscape(p.sidecar) + ".service"
	}
	return p.inst.unitStem() + "-" + string(p.role) + ".service"
}

// Cgroup is the child of the instance parent the process runs in: g<n>
// for a generation, role-seed, role-sidecar-<name> for a sidecar (each
// sidecar its own, so killing one never touches another). cmd has none.
func (p Proc) Cgroup() (string, error) {
	switch {
	case p.gen != 0:
		return GenerationCgroup(p.gen)
	case p.role == RoleSidecar:
		return SidecarCgroup(p.sidecar)
	}
	return RoleCgroup(p.role)
}
