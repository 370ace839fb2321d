package node

import (
	"context"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
)

// pollEvery is how often a slot is observed on a backend that shares no
// cgroup manager to watch with.
const pollEvery = 500 * time.Millisecond

// watch sends ref on Events once the slot's cgroup is seen empty (its
// process exited or was killed). It ends with ctx: the Node's life, cut
// short when the slot is let go of.
func (n *Node) watch(ctx context.Context, ref Ref, p layout.Proc) {
	empty, err := n.emptied(ctx, p)
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

// emptied is closed once the slot's cgroup is empty: through the shared
// manager's watch, or by observing the unit until it is gone.
func (n *Node) emptied(ctx context.Context, p layout.Proc) (<-chan struct{}, error) {
	m, err := n.manager(p.Instance())
	if err != nil {
		return nil, err
	}
	if m != nil {
		child, err := p.Cgroup()
		if err != nil {
			return nil, err
		}
		return m.WatchEmpty(ctx, child)
	}
	ch := make(chan struct{})
	go func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			if st, err := n.cfg.Backend.Observe(ctx, p); err == nil && st.Gone() {
				close(ch)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch, nil
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
