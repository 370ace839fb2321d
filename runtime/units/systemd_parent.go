package units

import (
	"context"
	"fmt"
	"slices"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// RaiseParent sets the instance slice's limit to overlap.
func (b *Systemd) RaiseParent(ctx context.Context, inst layout.Instance, overlap cgroups.Tier) error {
	return b.setParentLimit(ctx, inst, overlap)
}

// RestoreParent sets the slice back to floor, unless this backend last
// set it there itself (a settled Instance asks on every reconcile). It is
// refused (*cgroups.PopulatedError) while two generations run: the raise
// lives in the slice's properties, and a restarted agent, which knows
// nothing of it, must not lower it under both.
func (b *Systemd) RestoreParent(ctx context.Context, inst layout.Instance, floor cgroups.Tier) error {
	b.mu.Lock()
	last, known := b.limits[inst.SliceName()]
	b.mu.Unlock()
	if known && last == floor {
		return nil
	}
	busy, err := b.runningGenerations(ctx, inst)
	if err != nil {
		return fmt.Errorf("units: restore %s: %w", inst.SliceName(), err)
	}
	if len(busy) > 1 {
		return &cgroups.PopulatedError{Children: busy}
	}
	return b.setParentLimit(ctx, inst, floor)
}

// runningGenerations names inst's generation units that are not gone
// (one not gone still holds its cgroup: see Populated).
func (b *Systemd) runningGenerations(ctx context.Context, inst layout.Instance) ([]string, error) {
	sts, err := b.ListInstance(ctx, inst)
	if err != nil {
		return nil, err
	}
	var busy []string
	for _, st := range sts {
		if st.Slot != nil && st.Slot.Generation() != 0 && !st.Gone() {
			busy = append(busy, st.Unit)
		}
	}
	slices.Sort(busy)
	return busy, nil
}

// Populated goes by the manager's word: a unit not gone still holds its
// cgroup (KillMode=control-group stops it whole; the proof reads it).
func (b *Systemd) Populated(_ context.Context, _ layout.Slot, st Status) (bool, error) {
	return !st.Gone(), nil
}

// Stats reads the unit's cgroup where systemd puts it (layout names it),
// with no call to the manager: a scrape reads every unit's.
func (b *Systemd) Stats(_ context.Context, p layout.Slot) (cgroups.Stats, error) {
	st, err := cgroups.StatsAt(b.cfg.CgroupMount, p.UnitCgroup())
	if err != nil {
		return st, fmt.Errorf("units: stats of %s: %w", p.UnitName(), err)
	}
	return st, nil
}
