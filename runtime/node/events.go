package node

import (
	"context"

	"github.com/unitlet/unitlet/runtime/layout"
)

// watch sends ref on Events once the slot's cgroup is seen empty (its
// process exited or was killed). It ends with ctx: the Node's life, cut
// short when the slot is let go of.
func (n *Node) watch(ctx context.Context, ref Ref, p layout.Proc) {
	empty, err := n.cfg.Backend.WatchEmpty(ctx, p)
	if err != nil {
		n.cfg.Log.Info("no event watch", "unit", p.UnitName(), "err", err)
		return
	}
	go func() {
		select {
		case <-empty:
			n.send(ref)
		case <-ctx.Done():
		}
	}()
}

// send never blocks: a dropped event costs nothing, the reconciler reads
// the slot's state anyway.
func (n *Node) send(ref Ref) {
	select {
	case n.events <- ref:
	default:
		n.cfg.Log.Info("event dropped, channel full", "namespace", ref.Namespace, "name", ref.Name,
			"role", ref.Role, "generation", ref.Generation)
	}
}
