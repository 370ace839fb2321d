package unitstest

import (
	"context"
	"fmt"
	"slices"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// The instance parent's limit lives beside the units (Restart shares it),
// as it lives in a real parent's own files; which floor a backend last
// set lives in the backend, as in a real manager's memory.

// ensureParent is a start's part in the parent (m.mu held): made with
// tier, or kept above it while a generation runs, so a raise made by an
// earlier agent is never lowered under two generations.
func (b *Backend) ensureParent(inst layout.Instance, tier cgroups.Tier) {
	cg := inst.Cgroup()
	cur := b.m.parents[cg]
	last, known := b.floors[cg]
	if cur != nil && (b.raised[cg] || known && last == tier) {
		return // this backend set it: raised for a swap, or at this floor
	}
	target := tier
	if cur != nil && len(b.busy(inst)) > 0 {
		target = higher(tier, *cur)
	}
	b.m.parents[cg] = &target
	if target == tier {
		b.floors[cg], b.raised[cg] = tier, false
		return
	}
	delete(b.floors, cg)
	b.raised[cg] = true
}

// RaiseParent lifts the instance parent to overlap.
func (b *Backend) RaiseParent(_ context.Context, inst layout.Instance, overlap cgroups.Tier) error {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.limitable(inst); err != nil {
		return err
	}
	cg := inst.Cgroup()
	b.m.parents[cg] = &overlap
	delete(b.floors, cg)
	b.raised[cg] = true
	return nil
}

// RestoreParent lowers the parent to floor, refused while two
// generations hold processes; a floor this backend set itself is left.
func (b *Backend) RestoreParent(_ context.Context, inst layout.Instance, floor cgroups.Tier) error {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.limitable(inst); err != nil {
		return err
	}
	cg := inst.Cgroup()
	if last, ok := b.floors[cg]; ok && last == floor {
		return nil
	}
	if busy := b.busy(inst); len(busy) > 1 {
		return &cgroups.PopulatedError{Children: busy}
	}
	b.m.parents[cg] = &floor
	b.floors[cg], b.raised[cg] = floor, false
	return nil
}

// RemoveParent removes the parent with every unit of the instance (their
// records go with the Instance's directories); refused while one holds
// a process.
func (b *Backend) RemoveParent(_ context.Context, inst layout.Instance) error {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.open(); err != nil {
		return err
	}
	cg := inst.Cgroup()
	for name, u := range b.m.units {
		if u.proc.Instance().Cgroup() != cg {
			continue
		}
		if u.populated {
			return fmt.Errorf("unitstest: remove %s: %s still holds a process", cg, name)
		}
	}
	for name, u := range b.m.units {
		if u.proc.Instance().Cgroup() == cg {
			delete(b.m.units, name)
		}
	}
	delete(b.m.parents, cg)
	delete(b.floors, cg)
	delete(b.raised, cg)
	return nil
}

// limitable refuses a limit on a parent that is not there (m.mu held).
func (b *Backend) limitable(inst layout.Instance) error {
	if err := b.open(); err != nil {
		return err
	}
	if b.m.parents[inst.Cgroup()] == nil {
		return fmt.Errorf("%w: %s: %w", cgroups.ErrNoDelegation, inst.Cgroup(), cgroups.ErrParentAbsent)
	}
	return nil
}

// busy names inst's generation units whose cgroups hold processes.
func (b *Backend) busy(inst layout.Instance) []string {
	var out []string
	for name, u := range b.m.units {
		if u.populated && u.proc.Generation() != 0 && u.proc.Role() == layout.RoleApp &&
			u.proc.Instance().Cgroup() == inst.Cgroup() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// higher is the looser of a and b, field by field; a zero field ("no
// limit") is looser than any value.
func higher(a, b cgroups.Tier) cgroups.Tier {
	pick := func(x, y int64) int64 {
		if x == 0 || y == 0 {
			return 0
		}
		return max(x, y)
	}
	return cgroups.Tier{MemoryBytes: pick(a.MemoryBytes, b.MemoryBytes), CPUMillis: pick(a.CPUMillis, b.CPUMillis), Pids: pick(a.Pids, b.Pids)}
}
