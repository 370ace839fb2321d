// Package unitstest holds units in memory: a units.Backend with no
// process, manager or cgroup behind it, for tests of what sits above the
// backend (runtime/node) without root. Its units start, exit, stop and
// are proven gone as the real backends report them, its instance parents
// keep their limits as the real ones do (an overlap's raise outlives the
// agent that made it), and Fault makes a unit fail in ways a real one
// cannot be made to on demand. The real backends' own tables
// (runtime/units) stay the conformance layer this one is held to.
package unitstest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// ErrClosed refuses every call of a backend after its Close.
var ErrClosed = errors.New("unitstest: backend closed")

// Backend is a units.Backend over units held in memory. Everything a
// real backend keeps outside itself (units, their exits, the parents'
// limits) lives in what Restart shares; what a real one keeps in its own
// memory (which floor it set last) is this Backend's alone.
type Backend struct {
	m *machine
	// Guarded by m.mu: this backend's own memory, lost in a restart.
	closed   bool
	shutdown context.Context // bounds every proof; nil: none yet
	floors   map[string]cgroups.Tier
	raised   map[string]bool
}

var _ units.Backend = (*Backend)(nil)

// machine is what a node holds whatever agent runs: its units and its
// instance parents.
type machine struct {
	mu      sync.Mutex
	units   map[string]*unit         // by unit name
	parents map[string]*cgroups.Tier // the instance cgroup's limit
	faults  map[string]Fault         // by unit name
	starts  map[string]int           // starts a unit was handed
	stats   map[string]cgroups.Stats // what SetStats gave a unit
	lastPID int
}

// unit is one unit as its manager and its cgroup would tell.
type unit struct {
	proc      layout.Slot
	cgroup    string
	loaded    bool
	active    string // ActiveState
	sub       string // SubState
	pid       int
	id        string
	exit      *outcome.Exit
	populated bool
	waiters   map[*chan struct{}]struct{} // closed once the cgroup is empty
}

// New returns a backend holding no unit and no parent.
func New() *Backend {
	return newBackend(&machine{units: map[string]*unit{}, parents: map[string]*cgroups.Tier{},
		faults: map[string]Fault{}, starts: map[string]int{}, stats: map[string]cgroups.Stats{}})
}

func newBackend(m *machine) *Backend {
	return &Backend{m: m, floors: map[string]cgroups.Tier{}, raised: map[string]bool{}}
}

// Restart returns the backend a restarted agent makes over the same
// units and parents: it knows nothing this one kept in its own memory.
// This one is left as it is; close it as the old agent would have.
func (b *Backend) Restart() *Backend { return newBackend(b.m) }

// open is nil while b may be used; call it with m.mu held.
func (b *Backend) open() error {
	if b.closed {
		return ErrClosed
	}
	return nil
}

// Start hands spec's unit its start: the instance parent is made (with
// spec's floor; a run joins it as it is, and is refused without one),
// and the unit runs unless a Fault says otherwise.
func (b *Backend) Start(ctx context.Context, spec units.Spec) outcome.Start {
	p := spec.Slot
	res := outcome.Start{Unit: p.UnitName()}
	notStarted := func(err error) outcome.Start {
		res.Kind, res.Cause = outcome.NotStarted, fmt.Errorf("unitstest: start %s: %w", res.Unit, err)
		return res
	}
	child, err := p.Cgroup()
	if err != nil {
		return notStarted(err)
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return notStarted(err)
	}
	if err := ctx.Err(); err != nil {
		return notStarted(err)
	}
	if u := b.m.units[res.Unit]; u != nil && u.loaded && !u.status().Gone() {
		return notStarted(fmt.Errorf("unit is %s", u.active))
	}
	inst := p.Instance().Cgroup()
	if p.Role() == layout.RoleCommand {
		if b.m.parents[inst] == nil {
			return notStarted(fmt.Errorf("%w: %s", cgroups.ErrParentAbsent, inst))
		}
	} else {
		b.ensureParent(p.Instance(), spec.Parent)
	}
	f := b.m.faults[res.Unit]
	if f.Start != nil && f.Start.Kind == outcome.NotStarted {
		return notStarted(f.Start.Cause)
	}
	b.m.lastPID++
	b.m.starts[res.Unit]++
	u := &unit{proc: p, cgroup: path.Join(inst, child), loaded: true, active: "active", sub: "running",
		pid: b.m.lastPID, id: fmt.Sprintf("%032x", b.m.lastPID), populated: true, waiters: map[*chan struct{}]struct{}{}}
	b.m.units[res.Unit] = u
	res.Kind, res.MainPID, res.InvocationID, res.Cgroup = outcome.Running, u.pid, u.id, u.cgroup
	switch {
	case f.Start != nil:
		// Handed off: it runs, whatever the answer said.
		res.Kind, res.Cause, res.Exit = f.Start.Kind, f.Start.Cause, f.Start.Exit
		if f.Start.Kind == outcome.ExitedBeforeObserved && f.Start.Exit != nil {
			u.end(*f.Start.Exit)
		}
	case f.Exit != nil:
		// It ran and ended right after the answer (a command that is done).
		u.end(*f.Exit)
	}
	return res
}

// Stop ends the unit's main process as SIGTERM would.
func (b *Backend) Stop(ctx context.Context, p layout.Slot) error {
	return b.signal(ctx, p, outcome.Exit{Result: "signal", Signal: 15})
}

// Kill ends the unit's main process as SIGKILL would.
func (b *Backend) Kill(ctx context.Context, p layout.Slot) error {
	return b.signal(ctx, p, outcome.Exit{Result: "signal", Signal: 9})
}

func (b *Backend) signal(ctx context.Context, p layout.Slot, e outcome.Exit) error {
	b.m.mu.Lock()
	if err := b.open(); err != nil {
		b.m.mu.Unlock()
		return err
	}
	f, u := b.m.faults[p.UnitName()], b.m.units[p.UnitName()]
	if f.Hang {
		b.m.mu.Unlock()
		<-ctx.Done()
		return fmt.Errorf("unitstest: stop %s unanswered: %w", p.UnitName(), ctx.Err())
	}
	defer b.m.mu.Unlock()
	if u != nil && u.loaded {
		u.stop(e, f.Linger)
	}
	return nil
}

// Prove stops the unit and proves it gone: the unit is unloaded then (as
// systemd unloads a transient unit once it is reset), its exit still
// read by Observe, as its record would tell.
func (b *Backend) Prove(ctx context.Context, p layout.Slot) outcome.Kill {
	unit := p.UnitName()
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return outcome.Unproven(outcome.StopUnanswered, err)
	}
	if b.shutdown != nil && b.shutdown.Err() != nil {
		return outcome.Unproven(outcome.Cancelled, fmt.Errorf("unitstest: prove %s: shut down: %w", unit, b.shutdown.Err()))
	}
	if err := ctx.Err(); err != nil {
		return outcome.Unproven(outcome.ReasonFor(err), fmt.Errorf("unitstest: prove %s: %w", unit, err))
	}
	u := b.m.units[unit]
	if u == nil {
		return outcome.ProvenKill() // an absent cgroup is proven empty
	}
	u.stop(outcome.Exit{Result: "signal", Signal: 9}, b.m.faults[unit].Linger)
	if u.populated {
		return outcome.Unproven(outcome.CgroupNotEmpty, fmt.Errorf("unitstest: %s: cgroup %s still holds a process", unit, u.cgroup))
	}
	u.loaded = false
	u.active, u.sub = "inactive", "dead"
	return outcome.ProvenKill()
}

// Observe reads the unit: an unknown one is not loaded, inactive.
func (b *Backend) Observe(_ context.Context, p layout.Slot) (units.Status, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return units.Status{}, err
	}
	if err := b.m.faults[p.UnitName()].Observe; err != nil {
		return units.Status{}, fmt.Errorf("unitstest: observe %s: %w", p.UnitName(), err)
	}
	u := b.m.units[p.UnitName()]
	if u == nil {
		pc := p
		return units.Status{Unit: p.UnitName(), ActiveState: "inactive", SubState: "dead", Slot: &pc}, nil
	}
	return u.status(), nil
}

// List returns every loaded unit, by name.
func (b *Backend) List(_ context.Context) ([]units.Status, error) {
	return b.list(func(*unit) bool { return true })
}

// ListInstance returns inst's loaded units, by name.
func (b *Backend) ListInstance(_ context.Context, inst layout.Instance) ([]units.Status, error) {
	return b.list(func(u *unit) bool { return u.proc.Instance().Cgroup() == inst.Cgroup() })
}

func (b *Backend) list(keep func(*unit) bool) ([]units.Status, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return nil, err
	}
	var out []units.Status
	for _, u := range b.m.units {
		if u.loaded && keep(u) {
			out = append(out, u.status())
		}
	}
	slices.SortFunc(out, func(a, b units.Status) int { return cmp.Compare(a.Unit, b.Unit) })
	return out, nil
}

// Shutdown bounds every later proof by ctx.
func (b *Backend) Shutdown(ctx context.Context) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	b.shutdown = ctx
}

// Populated is the unit's cgroup, whatever st says.
func (b *Backend) Populated(_ context.Context, p layout.Slot, _ units.Status) (bool, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return false, err
	}
	u := b.m.units[p.UnitName()]
	return u != nil && u.populated, nil
}

// WatchEmpty is closed once the unit's cgroup is empty (at once when it
// is already); the watch ends with ctx.
func (b *Backend) WatchEmpty(ctx context.Context, p layout.Slot) (<-chan struct{}, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	u := b.m.units[p.UnitName()]
	if u == nil || !u.populated {
		close(ch)
		return ch, nil
	}
	u.waiters[&ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		b.m.mu.Lock()
		defer b.m.mu.Unlock()
		delete(u.waiters, &ch)
	})
	return ch, nil
}

// Close lets go of b: its units keep running, for Restart's backend.
func (b *Backend) Close() {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	b.closed = true
}

// status is u as Observe reports it.
func (u *unit) status() units.Status {
	pc := u.proc
	st := units.Status{Unit: u.proc.UnitName(), Loaded: u.loaded, ActiveState: u.active, SubState: u.sub,
		InvocationID: u.id, MainPID: u.pid, Cgroup: u.cgroup, Slot: &pc}
	if u.exit != nil {
		e := *u.exit
		st.Exit = &e
	}
	return st
}

// end is the main process ending by itself with e: the cgroup empties.
func (u *unit) end(e outcome.Exit) {
	u.exit, u.pid = &e, 0
	u.active, u.sub = "failed", "failed"
	if e.Result == "success" {
		u.active, u.sub = "inactive", "dead"
	}
	u.empty()
}

// stop ends a running main process with e; lingering, a process stays
// in the cgroup and the unit stays deactivating until Release.
func (u *unit) stop(e outcome.Exit, linger bool) {
	if u.exit == nil {
		u.exit = &e
	}
	u.pid = 0
	if linger && u.populated {
		u.active, u.sub = "deactivating", "stop-sigterm"
		return
	}
	if u.active == "active" || u.active == "deactivating" {
		u.active, u.sub = "failed", "failed"
	}
	u.empty()
}

// empty marks the cgroup empty and wakes its watchers.
func (u *unit) empty() {
	u.populated = false
	for ch := range u.waiters {
		close(*ch)
		delete(u.waiters, ch)
	}
}
