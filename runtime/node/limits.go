package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// RaiseParent lifts the instance parent to overlap while two
// generations run.
func (n *Node) RaiseParent(ctx context.Context, inst InstanceRef, overlap cgroups.Tier) error {
	li, m, pl, err := n.parentOf(inst)
	if err != nil {
		return err
	}
	if m != nil {
		if err := m.RaiseParent(overlap); err != nil {
			return fmt.Errorf("node: raise parent of %s/%s: %w", inst.Namespace, inst.Name, err)
		}
		return nil
	}
	return pl.SetParentLimit(ctx, li, overlap)
}

// RestoreParent lowers the instance parent back to its floor. The cgroup
// manager refuses (*cgroups.PopulatedError) while two generations hold
// processes.
func (n *Node) RestoreParent(ctx context.Context, inst InstanceRef) error {
	li, m, pl, err := n.parentOf(inst)
	if err != nil {
		return err
	}
	if m != nil {
		if err := m.RestoreParent(); err != nil {
			return fmt.Errorf("node: restore parent of %s/%s: %w", inst.Namespace, inst.Name, err)
		}
		return nil
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

// parentOf finds what sets inst's parent limit: the cgroup manager m when
// the node drives cgroupfs itself, else the backend as pl (m nil). A
// backend that can do neither is ErrNoParentLimit.
func (n *Node) parentOf(inst InstanceRef) (layout.Instance, cgroups.Manager, parentLimiter, error) {
	li, err := n.layoutOf(inst)
	if err != nil {
		return li, nil, nil, err
	}
	m, err := n.manager(li)
	if err != nil || m != nil {
		return li, m, nil, err
	}
	pl, ok := n.cfg.Backend.(parentLimiter)
	if !ok {
		return li, nil, nil, fmt.Errorf("%w: backend %T", ErrNoParentLimit, n.cfg.Backend)
	}
	return li, nil, pl, nil
}
