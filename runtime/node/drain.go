package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/unitlet/unitlet/runtime/sockdiag"
)

// DrainState is what the kernel says of a generation's listener before a stop.
type DrainState struct {
	// Needed: the generation still holds processes and its listener no
	// longer gets new connections (the stable socket leads to another);
	// false: stopping it cuts nothing a drain could save (it is gone, it
	// never bound its socket, or it is still what clients reach).
	Needed bool
	sockdiag.State
	// Proven: two looks drainProofGap apart found nothing queued and
	// nothing accepted open, the first after the flip.
	Proven bool
}

// drainProofGap separates the two looks of a proof: a connect that
// resolved the old path just before the flip lands in its queue within
// it (a connect blocked on a full queue is counted as queued anyway).
const drainProofGap = 10 * time.Millisecond

// Drain looks at generation ref's listener once (twice when the first
// look finds it drained) and says whether it may be stopped now.
func (n *Node) Drain(ctx context.Context, ref Ref) (DrainState, error) {
	sock, err := n.appSocket(ref)
	if err != nil {
		return DrainState{}, err
	}
	li, err := n.layoutOf(ref.InstanceRef)
	if err != nil {
		return DrainState{}, err
	}
	own, err := sockdiag.FileOf(sock)
	if errors.Is(err, fs.ErrNotExist) {
		return DrainState{}, nil // never bound: nothing queued on it
	}
	if err != nil {
		return DrainState{}, err
	}
	// Stat follows the stable symlink to the listener clients reach.
	if stable, err := sockdiag.FileOf(li.StableSocket()); err == nil && stable == own {
		return DrainState{}, nil
	}
	p, err := n.procOf(ref)
	if err != nil {
		return DrainState{}, err
	}
	st, err := n.cfg.Backend.Observe(ctx, p)
	if err != nil {
		return DrainState{}, fmt.Errorf("node: drain: %w", err)
	}
	if populated, err := n.cfg.Backend.Populated(ctx, p, st); err != nil || !populated {
		n.cfg.Log.V(1).Info("no drain: nothing runs", "unit", p.UnitName(), "err", err)
		return DrainState{}, err
	}
	d := DrainState{Needed: true}
	for look := 0; look < 2; look++ {
		if look > 0 {
			select {
			case <-ctx.Done():
				return d, ctx.Err()
			case <-time.After(drainProofGap):
			}
		}
		seen, err := sockdiag.Look(own)
		if err != nil {
			return d, fmt.Errorf("node: drain of %s: %w", sock, err)
		}
		if d.State = seen[own]; !d.Drained() {
			return d, nil
		}
	}
	d.Proven = true
	return d, nil
}
