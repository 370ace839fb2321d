package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/unitlet/unitlet/runtime/cgroups"
)

// RaiseParent lifts the instance parent to overlap while two
// generations run.
func (n *Node) RaiseParent(ctx context.Context, inst InstanceRef, overlap cgroups.Tier) error {
	li, err := n.layoutOf(inst)
	if err != nil {
		return err
	}
	m, err := n.manager(li)
	if err != nil {
		return err
	}
	if m != nil {
		if err := m.RaiseParent(overlap); err != nil {
			return fmt.Errorf("node: raise parent of %s/%s: %w", inst.Namespace, inst.Name, err)
		}
		return nil
	}
	pl, ok := n.cfg.Backend.(parentLimiter)
	if !ok {
		return fmt.Errorf("%w: backend %T", ErrNoParentLimit, n.cfg.Backend)
	}
	return pl.SetParentLimit(ctx, li, overlap)
}

// RestoreParent lowers the instance parent back to its floor. The cgroup
// manager refuses (*cgroups.PopulatedError) while two generations hold
// processes.
func (n *Node) RestoreParent(ctx context.Context, inst InstanceRef) error {
	li, err := n.layoutOf(inst)
	if err != nil {
		return err
	}
	m, err := n.manager(li)
	if err != nil {
		return err
	}
	if m != nil {
		if err := m.RestoreParent(); err != nil {
			return fmt.Errorf("node: restore parent of %s/%s: %w", inst.Namespace, inst.Name, err)
		}
		return nil
	}
	pl, ok := n.cfg.Backend.(parentLimiter)
	if !ok {
		return fmt.Errorf("%w: backend %T", ErrNoParentLimit, n.cfg.Backend)
	}
	in := n.instanceOf(inst)
	n.mu.Lock()
	floor, known := in.floor, in.floorKnown
	n.mu.Unlock()
	if !known {
		// After a restart only a Start tells the floor again.
		return errors.Join(ErrNoParentLimit, fmt.Errorf("node: floor of %s/%s unknown since no start", inst.Namespace, inst.Name))
	}
	return pl.SetParentLimit(ctx, li, floor)
}
