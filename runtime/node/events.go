package node

import (
	"context"
	"sync"

	"github.com/unitlet/unitlet/runtime/layout"
)

// watch sends ref on Events once the slot's cgroup is seen empty (its
// process exited or was killed). It ends with ctx: the Node's life, cut
// short when the slot is let go of.
func (n *Node) watch(ctx context.Context, ref Ref, p layout.Slot) {
	if b, ok := n.cfg.Backend.(emptyNotifier); ok {
		// A callback: a node's thousand settled slots hold no goroutine.
		if err := b.OnEmpty(ctx, p, func() { n.send(ref) }); err != nil {
			n.cfg.Log.Info("no event watch", "unit", p.UnitName(), "err", err)
		}
		return
	}
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

// emptyNotifier is a backend that calls back once a slot's cgroup is
// empty (the direct backend) instead of closing a channel.
type emptyNotifier interface {
	OnEmpty(ctx context.Context, p layout.Slot, fn func()) error
}

// pendingRefs is a set of slots waiting for delivery: a burst of exits
// (a mass delete) is never dropped, however slow the reader, and a slot
// seen twice before it is read is delivered once. That is what lets the
// reconcilers rely on events rather than look at every running
// generation again and again.
type pendingRefs struct {
	mu   sync.Mutex
	refs map[Ref]struct{}
	wake chan struct{} // one token: something is pending
}

// send never blocks.
func (n *Node) send(ref Ref) {
	n.pending.mu.Lock()
	n.pending.refs[ref] = struct{}{}
	n.pending.mu.Unlock()
	select {
	case n.pending.wake <- struct{}{}:
	default: // a token is there already
	}
}

// deliver hands pending slots to Events' reader for the Node's life.
func (n *Node) deliver() {
	for {
		select {
		case <-n.life.Done():
			return
		case <-n.pending.wake:
		}
		n.pending.mu.Lock()
		batch := n.pending.refs
		n.pending.refs = make(map[Ref]struct{}, len(batch))
		n.pending.mu.Unlock()
		for ref := range batch {
			select {
			case n.events <- ref:
			case <-n.life.Done():
				return
			}
		}
	}
}
