package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Retire stops the slot (SIGTERM; after grace, a kill) and proves it
// gone. Only a proven kill lets go of the slot's listeners: an unproven
// one keeps them, since the process may still write.
func (n *Node) Retire(ctx context.Context, ref Ref, grace time.Duration) outcome.Kill {
	p, err := n.procOf(ref)
	if err != nil {
		return outcome.Unproven(outcome.UnitActive, err)
	}
	in := n.instanceOf(ref.InstanceRef)
	if ref.Generation != 0 && in.fence.Serving() == ref.Generation {
		// A retiring generation writes nothing more.
		in.fence.Serve(0)
	}
	b := n.cfg.Backend
	if grace > 0 {
		sctx, cancel := context.WithTimeout(ctx, grace)
		err := b.Stop(sctx, p)
		cancel()
		if err != nil && ctx.Err() == nil {
			// The grace given here is over (or the stop failed): kill;
			// Prove below decides whether it worked.
			n.cfg.Log.Info("stop within grace failed, killing", "unit", p.UnitName(), "grace", grace, "err", err)
			if err := b.Kill(ctx, p); err != nil {
				n.cfg.Log.Info("kill failed", "unit", p.UnitName(), "err", err)
			}
		}
	}
	k := b.Prove(ctx, p)
	if !k.Proven {
		n.cfg.Log.Info("retire unproven", "unit", p.UnitName(), "reason", k.Reason, "err", k.Cause)
		return k
	}
	n.release(ref)
	n.cfg.Log.Info("retired", "unit", p.UnitName())
	return k
}

// release closes a proven-gone slot's listeners and ends its watch.
func (n *Node) release(ref Ref) {
	n.mu.Lock()
	in, ok := n.instances[ref.InstanceRef]
	var s *slot
	if ok {
		s = in.slots[ref]
		delete(in.slots, ref)
	}
	n.mu.Unlock()
	if s == nil {
		return
	}
	if s.watch != nil {
		s.watch()
	}
	if err := s.res.Close(); err != nil {
		n.cfg.Log.Info("close listeners", "namespace", ref.Namespace, "name", ref.Name, "generation", ref.Generation, "err", err)
	}
}

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
