package units

import (
	"context"
	"fmt"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Spec is one unit to start: which process slot (its names all come from
// layout), its own limits and how long a graceful stop may take.
type Spec struct {
	Slot layout.Slot
	// Tier is the unit's own limit; zero for roles that share the
	// instance parent's limit (seed, sidecar).
	Tier cgroups.Tier
	// Parent is the instance parent's limit (the slice), set before the
	// unit starts. A command has none: it runs inside the parent
	// as it is, under the Instance's tier, and is refused when there is
	// no parent; its zero Parent would otherwise lift every limit.
	Parent cgroups.Tier
	// Grace is how long a stop waits after SIGTERM before it kills.
	Grace time.Duration
	// Delegate hands the unit a cgroup subtree of its own.
	Delegate bool
	// Who the app runs as is in its launch file, which the trampoline
	// reads as root: the backend never sets a user itself.
}

// Status is what is observed about one unit now.
type Status struct {
	Unit         string
	Loaded       bool   // the manager knows the unit
	ActiveState  string // "active", "inactive", "failed", "activating", ...
	SubState     string
	InvocationID string // hex
	MainPID      int
	Cgroup       string        // as the manager names it
	Exit         *outcome.Exit // set once the main process has exited
	// Slot is the process slot the unit belongs to, when its name or
	// records map back to one (nil otherwise: re-adopt it by hand).
	Slot *layout.Slot
	// Uncertain: a start was handed off, and neither a live process nor
	// a record shows what became of it. It may have run.
	Uncertain bool
}

// StartOutcome is what a restarted agent knows of the unit's start from
// this status alone: Running while it is active, ExitedBeforeObserved
// (with the exit) when it ended unseen, MayHaveRun otherwise (starting,
// or gone with no record of how). It is never
// NotStarted: only the start call itself can prove that.
func (s Status) StartOutcome() outcome.Start {
	o := outcome.Start{Unit: s.Unit, InvocationID: s.InvocationID, MainPID: s.MainPID}
	switch {
	case s.ActiveState == "active" && !s.Uncertain:
		o.Kind = outcome.Running
	case s.Exit != nil:
		o.Kind = outcome.ExitedBeforeObserved
		o.Exit = s.Exit
		o.Cause = fmt.Errorf("units: %s (%s) %w", s.Unit, s.Exit.Result, outcome.ErrExitedBeforeObserved)
	default:
		o.Kind = outcome.MayHaveRun
		o.Cause = fmt.Errorf("units: %s: %s, no record of its end", s.Unit, s.ActiveState)
	}
	return o
}

// Gone reports whether the manager has the unit in no running state.
func (s Status) Gone() bool {
	return !s.Loaded || s.ActiveState == "inactive" || s.ActiveState == "failed"
}

// PlatformTasks is how many tasks the platform's own processes may need
// in a unit's cgroup beside the app: the direct backend's shim (a Go
// program, which stays the app's parent) and the trampoline before it
// execs the app (a Go program too; it builds the sandbox). A tier's pids
// limit is raised by it, so the tier counts the app's own tasks.
const PlatformTasks = 32

// Backend starts and stops the processes of a node's instances.
type Backend interface {
	// Start starts spec's unit. Every failure is classified: see
	// outcome.StartKind.
	Start(ctx context.Context, spec Spec) outcome.Start
	// Stop asks the unit to stop: SIGTERM, then a kill after its grace.
	Stop(ctx context.Context, p layout.Slot) error
	// Kill kills every process of the unit outright.
	Kill(ctx context.Context, p layout.Slot) error
	// Prove stops the unit and proves it gone (stop answered, unit
	// inactive, cgroup empty) within the backend's proof budget and
	// never past its shutdown. A proof cut short is Unproven.
	Prove(ctx context.Context, p layout.Slot) outcome.Kill
	// Observe reads the unit's state now.
	Observe(ctx context.Context, p layout.Slot) (Status, error)
	// List returns every unit this backend owns, for re-adoption after
	// an agent restart.
	List(ctx context.Context) ([]Status, error)
	// ListInstance returns what List returns of inst's units, without
	// observing the rest of the node.
	ListInstance(ctx context.Context, inst layout.Instance) ([]Status, error)
	// Shutdown bounds every running and future proof by ctx.
	Shutdown(ctx context.Context)

	// RaiseParent lifts the instance parent's limit to overlap while two
	// generations run; RestoreParent lowers it back to floor, the serving
	// generation's tier. Both backends refuse the restore
	// (*cgroups.PopulatedError) while two generations hold processes, and
	// keep a raise across an agent restart (it lives in the parent's own
	// limits, which a start never lowers while a generation runs).
	RaiseParent(ctx context.Context, inst layout.Instance, overlap cgroups.Tier) error
	RestoreParent(ctx context.Context, inst layout.Instance, floor cgroups.Tier) error
	// RemoveParent removes the instance parent and its cgroup; call it
	// only once every unit of the instance is proven gone.
	RemoveParent(ctx context.Context, inst layout.Instance) error
	// Populated reports whether p's cgroup holds a process; st is p's
	// status as just observed.
	Populated(ctx context.Context, p layout.Slot, st Status) (bool, error)
	// Stats reads p's cgroup usage now (cgroups.Stats); a cgroup that is
	// gone is cgroups.ErrNoChild.
	Stats(ctx context.Context, p layout.Slot) (cgroups.Stats, error)
	// WatchEmpty is closed once p's cgroup is empty (its process exited
	// or was killed); the watch ends with ctx.
	WatchEmpty(ctx context.Context, p layout.Slot) (<-chan struct{}, error)
	// Close lets go of connections and idle helpers. Units keep running:
	// a new backend re-adopts them.
	Close()
}
