package node

import (
	"context"
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
	if err := n.cfg.Backend.RaiseParent(ctx, li, overlap); err != nil {
		return fmt.Errorf("node: raise parent of %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	return nil
}

// RestoreParent lowers the instance parent back to floor. It is refused
// (*cgroups.PopulatedError) while two generations hold processes.
func (n *Node) RestoreParent(ctx context.Context, inst InstanceRef, floor cgroups.Tier) error {
	li, err := n.layoutOf(inst)
	if err != nil {
		return err
	}
	if err := n.cfg.Backend.RestoreParent(ctx, li, floor); err != nil {
		return fmt.Errorf("node: restore parent of %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	return nil
}
