// Package node is the node runtime as the reconcilers see it: one call per
// thing a Generation or an Instance needs (prepare and start, observe,
// probe, promote, retire and prove, limits, clean-up), composed from
// layout, prepare, cgroups and units. It imports no Kubernetes package.
package node

import (
	"context"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// InstanceRef names an Instance on this node.
type InstanceRef struct {
	Namespace, Name string
}

// Ref names one process slot of an Instance: a generation (Role run,
// Generation ≥ 1) or a role unit (seed, sidecar, cmd; Generation 0). A
// sidecar and a run also carry their names: an Instance may have several.
type Ref struct {
	InstanceRef
	Role       layout.Role
	Generation int64
	Sidecar    string // the sidecar's name, role sidecar only
	Command    string // the command's name, role command only
}

// SidecarRef is the slot of the Instance's sidecar called name.
func SidecarRef(namespace, name, sidecar string) Ref {
	return Ref{InstanceRef: InstanceRef{namespace, name}, Role: layout.RoleSidecar, Sidecar: sidecar}
}

// GenerationRef is the slot of generation n's app.
func GenerationRef(namespace, name string, n int64) Ref {
	return Ref{InstanceRef: InstanceRef{namespace, name}, Role: layout.RoleApp, Generation: n}
}

// StartRequest is everything needed to prepare and start one slot.
type StartRequest struct {
	Ref
	Host    string
	Command []string // argv prefix; Args follow, $(VAR) expanded from the env
	Args    []string
	SpecEnv map[string]string // the Instance's own env layer
	RefEnv  map[string]string // Secret/ConfigMap data, above SpecEnv
	// InstanceKey is given to the process as UNITLET_INSTANCE_KEY, above
	// both ("": none).
	InstanceKey string
	WorkingDir  string
	User        string         // "" for the Instance's own uid
	Grant       identity.Grant // the administrator's word on User
	// AllowMetadata: the template asks to reach the cloud metadata
	// service; refused (ErrMetadataNotGranted) unless Grant allows it.
	AllowMetadata bool
	Tier          cgroups.Tier // the slot's own limit (zero for seed/sidecar)
	Parent        cgroups.Tier // the instance parent's floor (the tier)
	Grace         time.Duration
	// Activated: the agent binds the generation's listening socket and
	// hands it over as fd 3 (run role only; see runtime/activation).
	Activated bool
}

// Step is one timed prepare step.
type Step struct {
	Name     string
	Duration time.Duration
}

// StartResult is a start's outcome with what prepare found on the way.
type StartResult struct {
	Start    outcome.Start
	Unit     string
	Cgroup   string
	Steps    []Step
	Warnings []string // things prepare continued past (e.g. no control socket)
}

// State is one slot as observed now.
type State struct {
	units.Status
	// Populated: the slot's cgroup holds processes.
	Populated bool
	// OOM is the kernel's OOM kills in the slot's cgroup and its memory
	// limit, read once the slot ended (an exit and an empty cgroup) and
	// its cgroup could still be read; nil otherwise.
	OOM *OOM
}

// OOM is what the kernel's OOM killer did in an ended slot's cgroup.
type OOM struct {
	Kills            uint64
	MemoryLimitBytes int64 // cgroups.Unlimited or Absent when none
}

// Readiness is a probe over a generation's own app socket.
type Readiness struct {
	// HTTPPath: GET this path; "" means a connect suffices.
	HTTPPath string
	// Timeout bounds one probe attempt.
	Timeout time.Duration
}

// Runtime is what the reconcilers call. Every method is safe to repeat:
// a reconcile that crashed half-way calls it again.
type Runtime interface {
	// Identity says who inst's processes run as: user, or the Instance's
	// own uid, under grant g (see identity.Grant). identity.ErrNotGranted,
	// ErrRootRefused, ErrNeverGranted and ErrUnknownUser say why not.
	Identity(inst InstanceRef, user string, g identity.Grant) (identity.Credential, error)
	// Start prepares the slot (dirs, env, sockets, launch file), places it
	// and starts its unit. The outcome says whether it may have run.
	Start(ctx context.Context, req StartRequest) StartResult
	// Observe reads the slot's unit, cgroup and exit record.
	Observe(ctx context.Context, ref Ref) (State, error)
	// Probe checks a generation's readiness once over its own socket.
	Probe(ctx context.Context, ref Ref, r Readiness) error
	// Promote flips the Instance's stable app.sock to generation ref
	// atomically and returns the stable socket path.
	Promote(ctx context.Context, ref Ref) (string, error)
	// Drain says whether generation ref, superseded by a swap, may be
	// stopped without cutting a connection: its listener's queue empty
	// and nothing it accepted still open, as the kernel reports them.
	Drain(ctx context.Context, ref Ref) (DrainState, error)
	// Retire stops the slot gracefully (SIGTERM, grace, kill) and proves
	// it gone: Proven only when the stop was answered, the unit is
	// inactive and its cgroup was seen empty.
	Retire(ctx context.Context, ref Ref, grace time.Duration) outcome.Kill
	// RaiseParent lifts the Instance's parent limit for an overlap;
	// RestoreParent lowers it back to floor, the serving generation's
	// tier, once only one generation runs.
	RaiseParent(ctx context.Context, inst InstanceRef, overlap cgroups.Tier) error
	RestoreParent(ctx context.Context, inst InstanceRef, floor cgroups.Tier) error
	// Remove deletes the Instance's directories and parent cgroup; call
	// only after every slot is proven gone.
	Remove(ctx context.Context, inst InstanceRef) error
	// Forget removes the files the node keeps of a slot proven gone
	// (ErrHeld while it is not).
	Forget(ctx context.Context, ref Ref) error
	// List returns every slot the node holds, for re-adoption.
	List(ctx context.Context) ([]Ref, error)
	// ListInstance returns every slot of inst the node holds, looking at
	// no other Instance.
	ListInstance(ctx context.Context, inst InstanceRef) ([]Ref, error)
	// Events delivers a slot whenever its unit or cgroup changed (exited,
	// emptied), so reconcilers need no polling loop.
	Events() <-chan Ref
	// Activity says when a connection last reached an activated
	// Instance's socket, and whether one is queued or open now.
	Activity(inst InstanceRef) Activity
	// Listen makes sure the agent holds an activated Instance's socket
	// while none of its generations runs, so a connection wakes it.
	Listen(ctx context.Context, inst InstanceRef) error
	// Run runs a one-off command in a generation's environment (role
	// cmd: its own unit and cgroup child) until it ends or ctx does, and
	// returns with the proof that nothing of it is left.
	Run(ctx context.Context, req RunRequest) RunResult
	// StableSocket is where the Instance's app answers.
	StableSocket(inst InstanceRef) (string, error)
}
