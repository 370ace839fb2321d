package units

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/go-logr/logr"
	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/sync/semaphore"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// SystemdConfig configures the systemd backend.
type SystemdConfig struct {
	// Connect opens a connection to the manager over D-Bus.
	Connect func(ctx context.Context) (*sddbus.Conn, error)
	// Signals opens a plain connection to the same bus, on which the
	// backend hears units stop; without it watches poll each unit.
	Signals func(ctx context.Context) (*godbus.Conn, error)
	// Exe is the absolute path of the unitlet binary, run as
	// "<Exe> exec --launch FILE --log-socket PATH".
	Exe string
	// CgroupDirs maps a cgroup as systemd names it to the directories
	// that must be empty for a kill to be proven (one per hierarchy the
	// agent can read).
	CgroupDirs func(cgroup string) []string
	// CgroupMount is where the cgroup file systems are mounted, for
	// usage stats ("" is the host's default).
	CgroupMount string
	// ProofBudget bounds one Prove.
	ProofBudget time.Duration
	// Layout, when set, maps listed unit names back to their process
	// slots (Status.Slot).
	Layout layout.Layout
	Log    logr.Logger
}

// Systemd runs units as transient systemd services, one slice per
// instance.
type Systemd struct {
	cfg    SystemdConfig
	proofs *proofs

	// reads bounds property reads in flight on conn (maxPropReads).
	reads *semaphore.Weighted
	// events wakes the watches of units systemd says are stopping;
	// backstop is how often a watch looks besides (a test's to change).
	events   unitEvents
	backstop time.Duration

	mu   sync.Mutex
	conn *sddbus.Conn
	// limits are the slice limits this backend last set at runtime, by
	// slice; guarded by mu.
	limits map[string]cgroups.Tier

	// afterJob, when set by a test, runs between a start job's result and
	// the first look at the unit: it widens the window in which an app
	// that exits at once is seen gone.
	afterJob func()
	// afterSend, when set by a test, runs once a start is sent, before
	// its job's result.
	afterSend func()
}

var _ Backend = (*Systemd)(nil)

// NewSystemd returns the backend; it connects on first use.
func NewSystemd(cfg SystemdConfig) (*Systemd, error) {
	if cfg.Connect == nil || cfg.CgroupDirs == nil {
		return nil, errors.New("units: systemd backend needs Connect and CgroupDirs")
	}
	if cfg.ProofBudget <= 0 {
		return nil, errors.New("units: systemd backend needs a positive ProofBudget")
	}
	return &Systemd{cfg: cfg, proofs: newProofs(cfg.ProofBudget), reads: newPropReads(), backstop: backstop}, nil
}

// connection returns the live connection, dialling again after one was
// lost.
func (b *Systemd) connection(ctx context.Context) (*sddbus.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && b.conn.Connected() {
		return b.conn, nil
	}
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	c, err := b.cfg.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("units: connect to systemd: %w", err)
	}
	b.conn = c
	return c, nil
}

// Close drops the connection.
func (b *Systemd) Close() {
	b.events.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
}

// Shutdown bounds every running and future proof by ctx.
func (b *Systemd) Shutdown(ctx context.Context) { b.proofs.shutdownWith(ctx) }

// Start starts spec's unit in its instance's slice and classifies the
// result: anything that fails before the service's start call is sent is
// NotStarted; once sent, only the manager's own word (a refused property,
// a failed exec) can prove nothing ran.
func (b *Systemd) Start(ctx context.Context, spec Spec) outcome.Start {
	unit := spec.Slot.UnitName()
	res := outcome.Start{Unit: unit}
	fail := func(k outcome.StartKind, err error) outcome.Start {
		res.Kind, res.Cause = k, err
		b.cfg.Log.Info("start failed", "unit", unit, "outcome", k.String(), "err", err)
		return res
	}
	props, err := b.serviceProps(spec)
	if err != nil {
		return fail(outcome.NotStarted, err)
	}
	c, err := b.connection(ctx)
	if err != nil {
		return fail(outcome.NotStarted, err)
	}
	if err := b.parentFor(ctx, c, spec); err != nil {
		return fail(outcome.NotStarted, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(outcome.NotStarted, fmt.Errorf("units: start %s not sent: %w", unit, err))
	}
	// Sent, its answer is awaited past the caller's cancellation (an agent
	// stopping for a rollout), within the shutdown's budget: cut short, it
	// left a start uncertain that the next agent could only give up after
	// the readiness timeout, and a generation no edit asked for.
	ctx, release := b.proofs.detach(ctx, 0)
	defer release()
	done := make(chan string, 1)
	id, err := b.sendStart(ctx, c, unit, props, done)
	if err != nil {
		if refusedByManager(err) {
			return fail(outcome.NotStarted, fmt.Errorf("units: systemd refused %s: %w", unit, err))
		}
		return fail(outcome.MayHaveRun, fmt.Errorf("units: start %s: %w", unit, err))
	}
	res.Job = strconv.Itoa(id)
	if b.afterSend != nil {
		b.afterSend()
	}
	var result string
	select {
	case result = <-done:
	case <-ctx.Done():
		return fail(outcome.QueuedJobMayRun, fmt.Errorf("units: start %s: job %d still queued: %w", unit, id, ctx.Err()))
	}
	if b.afterJob != nil {
		b.afterJob()
	}
	st, err := b.observe(ctx, c, unit)
	if err != nil {
		return fail(outcome.MayHaveRun, fmt.Errorf("units: start %s: job %s, then: %w", unit, result, err))
	}
	res.InvocationID, res.MainPID, res.Cgroup = st.InvocationID, st.MainPID, st.Cgroup
	if st.Exit != nil {
		res.Exit = st.Exit
	}
	kind, err := judgeJob(unit, result, st)
	if kind == outcome.Running {
		res.Kind = outcome.Running
		return res
	}
	if kind == outcome.NotStarted && result == "failed" {
		_ = c.ResetFailedUnitContext(ctx, unit) // free the name for a retry
	}
	return fail(kind, err)
}

// judgeJob reads a start job's result and the unit's first look after
// it as an outcome (and its cause, for every kind but Running).
func judgeJob(unit, result string, st Status) (outcome.StartKind, error) {
	switch {
	case result == "done" && !st.Gone() && st.Exit == nil:
		// (A main process that has exited while ExecStopPost still runs
		// leaves the unit deactivating: that is an exit, not a run.)
		return outcome.Running, nil
	case result == "done":
		return outcome.ExitedBeforeObserved, fmt.Errorf("%s %w", unit, outcome.ErrExitedBeforeObserved)
	case result == "failed" && execFailed(st):
		// Type=exec: the job fails only when the trampoline was never
		// exec'd.
		return outcome.NotStarted, fmt.Errorf("units: %s did not exec (status %d): %s", unit, st.Exit.Code, st.Exit.Result)
	}
	return outcome.MayHaveRun, fmt.Errorf("units: start %s: job result %q", unit, result)
}

// sendStart sends unit's start. A failed unit stays loaded under its
// name until it is reset, and a transient unit cannot be started over a
// loaded one: a slot whose name comes back (a sidecar started again, a
// seed run again) is refused with UnitExists, which creates nothing.
// Only then is the name reset and the start sent again, a round trip
// most starts (a name never used) do not need. Callers start a slot only
// once its last run is seen gone, and a reset leaves a unit that is not
// failed as it is: a start refused again is judged as any other.
func (b *Systemd) sendStart(ctx context.Context, c *sddbus.Conn, unit string, props []sddbus.Property, done chan<- string) (int, error) {
	id, err := c.StartTransientUnitContext(ctx, unit, "fail", props, done)
	if !unitExists(err) {
		return id, err
	}
	if err := c.ResetFailedUnitContext(ctx, unit); err != nil && !noSuchUnit(err) {
		b.cfg.Log.Info("failed state not reset", "unit", unit, "err", err.Error())
	}
	return c.StartTransientUnitContext(ctx, unit, "fail", props, done)
}

// refusedByManager reports errors systemd answers before it creates any
// unit: a property it rejects.
func refusedByManager(err error) bool {
	var de godbus.Error
	if !errors.As(err, &de) {
		return false
	}
	switch de.Name {
	case "org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.PropertyReadOnly":
		return true
	}
	return false
}

// execFailed reports a main process that failed in systemd's own setup
// before exec (its EXIT_* codes 200-243: EXEC, USER, NAMESPACE, CGROUP...).
func execFailed(st Status) bool {
	return st.Exit != nil && st.Exit.Result == "exit-code" && st.Exit.Code >= 200 && st.Exit.Code <= 243
}

// parentFor makes spec's instance slice ready: started with the parent
// limit, or, for a run, already active (a run never sets the slice: see
// Spec.Parent).
func (b *Systemd) parentFor(ctx context.Context, c *sddbus.Conn, spec Spec) error {
	inst := spec.Slot.Instance()
	if spec.Slot.Role() != layout.RoleCommand {
		return b.ensureSlice(ctx, c, inst, spec.Parent)
	}
	st, err := b.observeSlice(ctx, c, inst.SliceName())
	if err != nil {
		return fmt.Errorf("units: read slice %s: %w", inst.SliceName(), err)
	}
	if !st.active {
		return fmt.Errorf("units: run %s: the instance's slice %s is not active", spec.Slot.UnitName(), inst.SliceName())
	}
	return nil
}

// ensureSlice starts the instance's slice with the parent limit. A slice
// that is already there keeps its limits: raising and restoring them for an
// overlap is setParentLimit's, and a start must not undo a raise.
func (b *Systemd) ensureSlice(ctx context.Context, c *sddbus.Conn, inst layout.Instance, parent cgroups.Tier) error {
	slice := inst.SliceName()
	props := append([]sddbus.Property{sddbus.PropDescription("unitlet instance " + inst.Namespace() + "/" + inst.Name())}, tierProps(parent, false)...)
	done := make(chan string, 1)
	_, err := c.StartTransientUnitContext(ctx, slice, "fail", props, done)
	if unitExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("units: start slice %s: %w", slice, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("units: start slice %s: job result %q", slice, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("units: start slice %s: %w", slice, ctx.Err())
	}
}

// setParentLimit sets the instance slice's limit at runtime: raised for
// an overlap, restored after it (a zero field becomes "no limit").
func (b *Systemd) setParentLimit(ctx context.Context, inst layout.Instance, t cgroups.Tier) error {
	c, err := b.connection(ctx)
	if err != nil {
		return err
	}
	slice := inst.SliceName()
	b.mu.Lock()
	delete(b.limits, slice) // unknown until the call answers
	b.mu.Unlock()
	if err := b.setSlice(ctx, c, slice, t); err != nil {
		return err
	}
	b.mu.Lock()
	if b.limits == nil {
		b.limits = map[string]cgroups.Tier{}
	}
	b.limits[slice] = t
	b.mu.Unlock()
	return nil
}

func (b *Systemd) setSlice(ctx context.Context, c *sddbus.Conn, slice string, t cgroups.Tier) error {
	if err := c.SetUnitPropertiesContext(ctx, slice, true, tierProps(t, true)...); err != nil {
		return fmt.Errorf("units: set limits of %s: %w", slice, err)
	}
	return nil
}

// ErrSliceBusy refuses RemoveParent while the slice holds processes:
// stopping it would kill them with no proof.
var ErrSliceBusy = errors.New("units: instance slice still holds processes")

// RemoveParent stops the instance's slice, so systemd removes its cgroup
// (a transient slice stays active, cgroup and all, after its last unit is
// gone). Call it only once every unit of the instance is proven gone; it
// refuses with ErrSliceBusy while the slice's cgroup holds a process. A
// slice the manager does not know is removed.
func (b *Systemd) RemoveParent(ctx context.Context, inst layout.Instance) error {
	c, err := b.connection(ctx)
	if err != nil {
		return err
	}
	slice := inst.SliceName()
	b.mu.Lock()
	delete(b.limits, slice)
	b.mu.Unlock()
	st, err := b.observeSlice(ctx, c, slice)
	if err != nil {
		return fmt.Errorf("units: read slice %s: %w", slice, err)
	}
	if !st.active {
		return nil
	}
	if st.cgroup != "" {
		if err := visible(b.cfg.CgroupDirs(st.cgroup)); err != nil {
			return fmt.Errorf("units: cannot see the cgroup of %s: %w", slice, err)
		}
		n, err := populated(b.cfg.CgroupDirs(st.cgroup))
		if err != nil {
			return fmt.Errorf("units: read cgroup of %s: %w", slice, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: %s has %d", ErrSliceBusy, slice, n)
		}
	}
	return stopUnit(ctx, c, slice)
}
