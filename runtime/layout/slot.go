package layout

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// Slot is one process slot of an instance: a generation's app (role app,
// generation n ≥ 1) or a role unit (seed, sidecar, command; generation 0).
// Sidecars and commands are named: an Instance has several.
// Every per-process name (launch file, exit records, log sockets, unit)
// comes from here, so a generation's names never collide with a role's.
type Slot struct {
	inst Instance
	role Role
	gen  int64
	name string // the sidecar's or the command's name
}

// RoleSlot validates the (role, generation) pair: the app always belongs
// to a generation; the other roles never do (a command runs against a
// generation, but its own names are not keyed by it). A sidecar or a
// command needs its name: use Sidecar or Command.
func (i Instance) RoleSlot(r Role, gen int64) (Slot, error) {
	switch {
	case !r.Valid():
		return Slot{}, fmt.Errorf("unknown role %q", r)
	case r == RoleApp && gen <= 0:
		return Slot{}, fmt.Errorf("role app: %w", ErrNotAGeneration)
	case r != RoleApp && gen != 0:
		return Slot{}, fmt.Errorf("role %s is not a generation unit (got generation %d)", r, gen)
	case r == RoleSidecar:
		return Slot{}, fmt.Errorf("role sidecar: %w", ErrBadSidecarName)
	case r == RoleCommand:
		return Slot{}, fmt.Errorf("role command: %w", ErrBadCommandName)
	}
	return Slot{inst: i, role: r, gen: gen}, nil
}

// SidecarNameMax bounds a sidecar's name so its log socket still fits
// sun_path (see longestSocketSuffix) and its unit name systemd's limit.
const SidecarNameMax = 32

// ErrBadSidecarName is returned for a sidecar name that is missing, not a
// DNS-1123 label, or longer than SidecarNameMax.
var ErrBadSidecarName = errors.New("sidecar name must be a DNS-1123 label of at most 32 characters")

// Sidecar is the slot of the sidecar called name: several sidecars of one
// Instance each get their own unit, files and cgroup child.
func (i Instance) Sidecar(name string) (Slot, error) {
	if len(name) > SidecarNameMax || !isDNSLabel(name) {
		return Slot{}, fmt.Errorf("%w: %q", ErrBadSidecarName, name)
	}
	return Slot{inst: i, role: RoleSidecar, name: name}, nil
}

// CommandNameMax bounds a command's name so its stderr socket
// ("/logs/cmd.<name>.err.sock") stays within the longest socket suffix.
const CommandNameMax = 24

// ErrBadCommandName is returned for a command name that is missing, not a
// DNS-1123 label, or longer than RunNameMax.
var ErrBadCommandName = errors.New("command name must be a DNS-1123 label of at most 24 characters")

// Command is the slot of the one-off command called name: each has its
// own unit, sockets and cgroup child, so two may run at once.
func (i Instance) Command(name string) (Slot, error) {
	if len(name) > CommandNameMax || !isDNSLabel(name) {
		return Slot{}, fmt.Errorf("%w: %q", ErrBadCommandName, name)
	}
	return Slot{inst: i, role: RoleCommand, name: name}, nil
}

// Slot is Sidecar(name) for role sidecar, Command(name) for role command
// and RoleSlot(r, gen) otherwise, for callers that carry the three parts
// (records, refs, parsed names); a name on another role is refused.
func (i Instance) Slot(r Role, gen int64, name string) (Slot, error) {
	if r == RoleSidecar || r == RoleCommand {
		if gen != 0 {
			return Slot{}, fmt.Errorf("role %s is not a generation unit (got generation %d)", r, gen)
		}
		if r == RoleCommand {
			return i.Command(name)
		}
		return i.Sidecar(name)
	}
	if name != "" {
		return Slot{}, fmt.Errorf("role %s has no name of its own (got %q)", r, name)
	}
	return i.RoleSlot(r, gen)
}

// Generation is RoleSlot(RoleApp, n): generation n's app.
func (i Instance) Generation(n int64) (Slot, error) { return i.RoleSlot(RoleApp, n) }

func (p Slot) Instance() Instance { return p.inst }
func (p Slot) Role() Role         { return p.role }

// SidecarName is the sidecar's name, "" for every other role.
func (p Slot) SidecarName() string {
	if p.role != RoleSidecar {
		return ""
	}
	return p.name
}

// CommandName is the command's name, "" for every other role.
func (p Slot) CommandName() string {
	if p.role != RoleCommand {
		return ""
	}
	return p.name
}

// Generation is the generation number, 0 for a role unit.
func (p Slot) Generation() int64 { return p.gen }

// key is the per-process part of file names: "gen.<n>", "sidecar.<name>",
// "cmd.<name>" or the role. A name is a DNS label (no dot), so no key is
// a prefix of another up to the dot that follows it.
func (p Slot) key() string {
	switch {
	case p.gen != 0:
		return "gen." + strconv.FormatInt(p.gen, 10)
	case p.name != "":
		return string(p.role) + "." + p.name
	}
	return string(p.role)
}

// LaunchFile is the launch file's name beneath the data dir:
// launch.gen.<n>.json, launch.sidecar.<name>.json, launch.cmd.<name>.json
// or launch.<role>.json.
func (p Slot) LaunchFile() string { return "launch." + p.key() + ".json" }

// MemoryEnvFile is the name, beneath the run dir (the run root is
// memory, a tmpfs), of the env that must never be on the node's disk
// (the instance key): memenv.gen.<n>, memenv.sidecar.<name>, ...
func (p Slot) MemoryEnvFile() string { return "memenv." + p.key() }

// ExitPrefix starts the names of this process's exit records in ExitDir:
// exit.gen.<n>., exit.sidecar.<name>. or exit.<role>.. The trailing dot keeps g1 from matching
// g10's records.
func (p Slot) ExitPrefix() string { return "exit." + p.key() + "." }

// LogSocket is where the process's stdout goes, and its stderr too except
// for cmd (see ErrLogSocket): g<n>.sock, sc.<name>.sock, cmd.<name>.out.sock
// or <role>.sock in LogDir. A sidecar's is short ("sc", not "sidecar") to leave sun_path
// room (see longestSocketSuffix).
func (p Slot) LogSocket() string {
	switch {
	case p.role == RoleCommand:
		return filepath.Join(p.inst.LogDir(), "cmd."+p.name+".out.sock")
	case p.gen != 0:
		return filepath.Join(p.inst.LogDir(), "g"+strconv.FormatInt(p.gen, 10)+".sock")
	case p.role == RoleSidecar:
		return filepath.Join(p.inst.LogDir(), sidecarLogSocketPrefix+p.name+".sock")
	}
	return filepath.Join(p.inst.LogDir(), string(p.role)+".sock")
}

// LogFIFO is where the process's output goes when a service manager, not
// a shim, runs it (the systemd backend): a named pipe beside LogSocket
// (g<n>.fifo, sc.<name>.fifo, <role>.fifo). The app holds it open itself,
// so its output survives an agent restart and waits for the next agent
// in the pipe. "" for cmd, whose two streams stay on sockets.
func (p Slot) LogFIFO() string {
	if p.role == RoleCommand {
		return ""
	}
	return strings.TrimSuffix(p.LogSocket(), ".sock") + ".fifo"
}

// sidecarLogSocketPrefix starts a sidecar's log socket name; no role is
// called "sc", so it collides with no other slot's.
const sidecarLogSocketPrefix = "sc."

// ErrLogSocket is the cmd role's separate stderr socket; "" for the other
// roles, whose stderr shares LogSocket.
func (p Slot) ErrLogSocket() string {
	if p.role != RoleCommand {
		return ""
	}
	return filepath.Join(p.inst.LogDir(), "cmd."+p.name+".err.sock")
}

// InSocket is where a run's stdin comes from (cmd.<name>.in.sock in
// LogDir); "" for the other roles, whose stdin is empty.
func (p Slot) InSocket() string {
	if p.role != RoleCommand {
		return ""
	}
	return filepath.Join(p.inst.LogDir(), "cmd."+p.name+".in.sock")
}

// TerminalSocket is where a TTY run's trampoline hands the agent its
// terminal (cmd.<name>.tty.sock in LogDir, as long as ErrLogSocket's
// name); "" for the other roles, which have no terminal.
func (p Slot) TerminalSocket() string {
	if p.role != RoleCommand {
		return ""
	}
	return filepath.Join(p.inst.LogDir(), "cmd."+p.name+".tty.sock")
}

// UnitPrefix starts every systemd unit and slice name unitlet creates.
const UnitPrefix = "unitlet"

// unitNameMax is systemd's limit on a unit name (UNIT_NAME_MAX - 1).
const unitNameMax = 255

// SliceName is the instance's slice, unitlet-<ns>-<name>.slice with each
// part escaped as systemd does (a "-" inside ns or name becomes \x2d, since
// a bare "-" in a slice name means nesting). When the escaped name would
// exceed systemd's length limit the instance part becomes "_" and its
// ShortID: an escaped namespace never starts with '_', so the shortened
// slice is no natural one, nor a parent systemd nests one in.
func (i Instance) SliceName() string { return i.unitStem() + ".slice" }

func (i Instance) unitStem() string {
	// Deciding on the worst-case unit suffix keeps the slice and all
	// units of an instance consistent.
	stem := UnitPrefix + "-" + unit.UnitNameEscape(i.namespace) + "-" + unit.UnitNameEscape(i.name)
	if len(stem)+longestUnitSuffix > unitNameMax {
		stem = UnitPrefix + "-_" + i.ShortID()
	}
	return stem
}

// HasUnit tells whether the service called name is one of the
// instance's: it starts with the stem all of them share. Every "-" inside
// a part is escaped, so no other instance's units share that prefix, and
// a shortened stem ("_" and a ShortID) is no natural one.
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
// sidecar, unitlet-<ns>-<name>-cmd-<run>.service for a run,
// unitlet-<ns>-<name>-<role>.service for another role unit. Each part is
// escaped, so bare dashes separate them.
func (p Slot) UnitName() string {
	switch {
	case p.gen != 0:
		return p.inst.unitStem() + "-g" + strconv.FormatInt(p.gen, 10) + ".service"
	case p.name != "":
		return p.inst.unitStem() + "-" + string(p.role) + "-" + unit.UnitNameEscape(p.name) + ".service"
	}
	return p.inst.unitStem() + "-" + string(p.role) + ".service"
}

// Cgroup is the child of the instance parent the process runs in: g<n>
// for a generation, role-seed, role-sidecar-<name> for a sidecar and
// role-cmd-<name> for a run (each its own, so killing one never touches
// another).
func (p Slot) Cgroup() (string, error) {
	switch {
	case p.gen != 0:
		return GenerationCgroup(p.gen)
	case p.role == RoleSidecar:
		return SidecarCgroup(p.name)
	case p.role == RoleCommand:
		return CommandCgroup(p.name)
	}
	return RoleCgroup(p.role)
}

// Placements are the cgroups the process may run in, relative to a
// hierarchy's root: the direct backend's <cgroup root>/<instance
// parent>/<child>, and systemd's unit cgroup beneath the slices its
// slice nests in. The activation hand-off gives a unit's socket only to
// a caller in one of them.
func (p Slot) Placements() ([]string, error) {
	child, err := p.Cgroup()
	if err != nil {
		return nil, err
	}
	return []string{path.Join(p.inst.Cgroup(), child), p.UnitCgroup()}, nil
}

// UnitCgroup is the cgroup systemd gives the slot's unit, relative to a
// hierarchy's root: the unit beneath the slices its slice nests in.
func (p Slot) UnitCgroup() string {
	return path.Join(sliceCgroup(p.inst.SliceName()), p.UnitName())
}

// sliceCgroup is where systemd puts slice: each '-' in its name is a
// level (unitlet-a-b.slice is unitlet.slice/unitlet-a.slice/unitlet-a-b.slice).
func sliceCgroup(slice string) string {
	stem := strings.TrimSuffix(slice, ".slice")
	var levels []string
	for i := 0; i <= len(stem); i++ {
		if i == len(stem) || stem[i] == '-' {
			levels = append(levels, stem[:i]+".slice")
		}
	}
	return path.Join(levels...)
}
