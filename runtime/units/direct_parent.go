package units

import (
	"context"
	"fmt"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// The instance parent on the direct backend is a cgroup the backend's own
// manager drives; it keeps the floor itself.

// RaiseParent lifts the parent cgroup's limit for an overlap.
func (b *Direct) RaiseParent(_ context.Context, inst layout.Instance, overlap cgroups.Tier) error {
	m, err := b.Manager(inst)
	if err != nil {
		return err
	}
	return m.RaiseParent(overlap)
}

// RestoreParent lowers the parent cgroup back to floor.
func (b *Direct) RestoreParent(_ context.Context, inst layout.Instance, floor cgroups.Tier) error {
	m, err := b.Manager(inst)
	if err != nil {
		return err
	}
	return m.RestoreParent(floor)
}

// RemoveParent removes the instance's cgroups (refused while populated).
func (b *Direct) RemoveParent(_ context.Context, inst layout.Instance) error {
	m, err := b.Manager(inst)
	if err != nil {
		return err
	}
	if err := m.Remove(); err != nil {
		return fmt.Errorf("units: remove cgroup %s: %w", inst.Cgroup(), err)
	}
	b.mu.Lock()
	delete(b.managers, inst.Cgroup()) // gone with its Instance: the map holds live ones only
	b.mu.Unlock()
	return nil
}

// Populated reads p's cgroup: the status alone cannot say, since a
// process that left the unit's main process behind still holds it.
func (b *Direct) Populated(_ context.Context, p layout.Slot, _ Status) (bool, error) {
	m, child, err := b.child(p)
	if err != nil {
		return false, err
	}
	pop, err := m.Populated(child)
	if err != nil {
		return false, fmt.Errorf("units: populated %s: %w", p.UnitName(), err)
	}
	return pop, nil
}

// Stats reads p's own cgroup child.
func (b *Direct) Stats(_ context.Context, p layout.Slot) (cgroups.Stats, error) {
	m, child, err := b.child(p)
	if err != nil {
		return cgroups.Stats{}, err
	}
	st, err := m.Stats(child)
	if err != nil {
		return st, fmt.Errorf("units: stats of %s: %w", p.UnitName(), err)
	}
	return st, nil
}

// WatchEmpty is the manager's watch of p's cgroup.
func (b *Direct) WatchEmpty(ctx context.Context, p layout.Slot) (<-chan struct{}, error) {
	m, child, err := b.child(p)
	if err != nil {
		return nil, err
	}
	return m.WatchEmpty(ctx, child)
}

// OnEmpty calls fn once p's cgroup is empty (the manager's watch), with
// no goroutine waiting for it.
func (b *Direct) OnEmpty(ctx context.Context, p layout.Slot, fn func()) error {
	m, child, err := b.child(p)
	if err != nil {
		return err
	}
	return m.OnEmpty(ctx, child, fn)
}

func (b *Direct) child(p layout.Slot) (cgroups.Manager, string, error) {
	m, err := b.Manager(p.Instance())
	if err != nil {
		return nil, "", err
	}
	child, err := p.Cgroup()
	if err != nil {
		return nil, "", err
	}
	return m, child, nil
}
