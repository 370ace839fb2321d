package node

import (
	"context"
	"time"

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
			// Bounded like the stop: a caller's context may never end, and a
			// kill that waits for a process that will not die would keep
			// the proof (with its own budget) from ever reporting it.
			kctx, cancel := context.WithTimeout(ctx, grace)
			if err := b.Kill(kctx, p); err != nil {
				n.cfg.Log.Info("kill failed", "unit", p.UnitName(), "err", err)
			}
			cancel()
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
	if p, err := n.procOf(ref); err == nil {
		n.withdraw(p)
	}
	if err := s.close(); err != nil {
		n.cfg.Log.Info("close listeners", "namespace", ref.Namespace, "name", ref.Name, "generation", ref.Generation, "err", err)
	}
	// The slot is gone: its log FIFO (left by close for an agent restart)
	// has no writer left to keep it for.
	if p, err := n.procOf(ref); err == nil && p.LogFIFO() != "" {
		if err := removeFile(p.LogFIFO()); err != nil {
			n.cfg.Log.Info("remove log fifo", "path", p.LogFIFO(), "err", err)
		}
	}
}
