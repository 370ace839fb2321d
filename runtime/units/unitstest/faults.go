package unitstest

import (
	"context"
	"fmt"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Fault is how one unit misbehaves; the zero Fault is none.
type Fault struct {
	// Start, when set, answers every start of the unit: NotStarted
	// leaves nothing behind (the parent a start makes first stays);
	// ExitedBeforeObserved leaves the unit ended with Start.Exit; any
	// other kind leaves it running (handed off, the answer lost).
	Start *outcome.Start
	// Exit ends the unit's process by itself right after its start: a
	// command that ran and is done.
	Exit *outcome.Exit
	// Hang: Stop and Kill do nothing and return only when their context
	// ends (a manager that does not answer). A proof still kills.
	Hang bool
	// Linger: a stop, kill or proof ends the main process but leaves one
	// in the cgroup, never seen empty until Release: the unit stays
	// deactivating and every proof is CgroupNotEmpty.
	Linger bool
	// Observe fails every Observe of the unit.
	Observe error
}

// Inject gives p's unit f from now on, on every backend Restart shares.
func (b *Backend) Inject(p layout.Slot, f Fault) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	b.m.faults[p.UnitName()] = f
}

// Exit ends p's running process by itself with e: its cgroup empties and
// its watchers are woken.
func (b *Backend) Exit(p layout.Slot, e outcome.Exit) error {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	u := b.m.units[p.UnitName()]
	if u == nil || u.pid == 0 {
		return fmt.Errorf("unitstest: %s has no running process", p.UnitName())
	}
	u.end(e)
	return nil
}

// Release lets a lingering process of p's unit go: its cgroup empties,
// the unit is gone, a later proof proves it. Its fault is cleared.
func (b *Backend) Release(p layout.Slot) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	delete(b.m.faults, p.UnitName())
	if u := b.m.units[p.UnitName()]; u != nil && u.populated && u.pid == 0 {
		u.active, u.sub = "failed", "failed"
		u.empty()
	}
}

// SetStats gives p's unit the usage its Stats reads from now on.
func (b *Backend) SetStats(p layout.Slot, st cgroups.Stats) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	b.m.stats[p.UnitName()] = st
}

// Stats is what SetStats gave p's unit (zero usage, no limit, if
// nothing); a unit it never started has no cgroup (cgroups.ErrNoChild).
func (b *Backend) Stats(_ context.Context, p layout.Slot) (cgroups.Stats, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return cgroups.Stats{}, err
	}
	if b.m.units[p.UnitName()] == nil {
		return cgroups.Stats{}, fmt.Errorf("unitstest: %s: %w", p.UnitName(), cgroups.ErrNoChild)
	}
	st, ok := b.m.stats[p.UnitName()]
	if !ok {
		st.MemoryLimitBytes = cgroups.Unlimited
	}
	return st, nil
}

// Parent is the limit inst's parent holds now; false when there is none.
func (b *Backend) Parent(inst layout.Instance) (cgroups.Tier, bool) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	t := b.m.parents[inst.Cgroup()]
	if t == nil {
		return cgroups.Tier{}, false
	}
	return *t, true
}

// Starts counts the starts p's unit was handed (NotStarted ones apart).
func (b *Backend) Starts(p layout.Slot) int {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return b.m.starts[p.UnitName()]
}
