package units

import (
	"context"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Spec is one unit to start: which process slot (its names all come from
// layout), its own limits and how long a graceful stop may take.
type Spec struct {
	Proc layout.Proc
	// Tier is the unit's own limit; zero for roles that share the
	// instance parent's limit (seed, sidecar).
	Tier cgroups.Tier
	// Parent is the instance parent's limit (the slice), set before the
	// unit starts.
	Parent cgroups.Tier
	// Grace is how long a stop waits after SIGTERM before it kills.
	Grace time.Duration
	// Delegate hands the unit a cgroup subtree of its own.
	Delegate bool
	// User runs the app as this user ("" keeps the manager's default).
	User string
}

// Exit is how a unit's main process ended, as the manager recorded it.
type Exit struct {
	Result string    // "success", "exit-code", "signal", "timeout", ...
	Code   int       // exit status when it exited
	Signal int       // signal number when it was killed
	At     time.Time // zero when unknown
}

// Status is what is observed about one unit now.
type Status struct {
	Unit         string
	Loaded       bool   // the manager knows the unit
	ActiveState  string // "active", "inactive", "failed", "activating", ...
	SubState     string
	InvocationID string // hex
	MainPID      int
	Cgroup       string // as the manager names it
	Exit         *Exit  // set once the main process has exited
}

// Gone reports whether the manager has the unit in no running state.
func (s Status) Gone() bool {
	return !s.Loaded || s.ActiveState == "inactive" || s.ActiveState == "failed"
}

// Backend starts and stops the processes of a node's instances.
type Backend interface {
	// Start starts spec's unit. Every failure is classified: see
	// outcome.StartKind.
	Start(ctx context.Context, spec Spec) outcome.Start
	// Stop asks the unit to stop: SIGTERM, then a kill after its grace.
	Stop(ctx context.Context, p layout.Proc) error
	// Kill kills every process of the unit outright.
	Kill(ctx context.Context, p layout.Proc) error
	// Prove stops the unit and proves it gone (stop answered, unit
	// inactive, cgroup empty) within the backend's proof budget and
	// never past its shutdown. A proof cut short is Unproven.
	Prove(ctx context.Context, p layout.Proc) outcome.Kill
	// Observe reads the unit's state now.
	Observe(ctx context.Context, p layout.Proc) (Status, error)
	// List returns every unit this backend owns, for re-adoption after
	// an agent restart.
	List(ctx context.Context) ([]Status, error)
	// Shutdown bounds every running and future proof by ctx.
	Shutdown(ctx context.Context)
}
