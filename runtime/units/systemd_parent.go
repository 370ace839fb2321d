package units

import (
	"context"
	"fmt"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// pollEvery is how often WatchEmpty observes a unit: systemd's own
// signals are not subscribed to, and the reconciler re-reads anyway.
const pollEvery = 500 * time.Millisecond

// RaiseParent sets the instance slice's limit to overlap.
func (b *Systemd) RaiseParent(ctx context.Context, inst layout.Instance, overlap cgroups.Tier) error {
	return b.setParentLimit(ctx, inst, overlap)
}

// RestoreParent sets the slice back to the floor the last Start gave it.
// systemd keeps no floor of its own, so after an agent restart only a
// Start tells it again.
func (b *Systemd) RestoreParent(ctx context.Context, inst layout.Instance) error {
	b.mu.Lock()
	floor, known := b.floors[inst.SliceName()]
	b.mu.Unlock()
	if !known {
		return fmt.Errorf("%w: no start of %s/%s since the agent began", ErrNoParentLimit, inst.Namespace(), inst.Name())
	}
	return b.setParentLimit(ctx, inst, floor)
}

func (b *Systemd) setFloor(inst layout.Instance, floor cgroups.Tier) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.floors == nil {
		b.floors = map[string]cgroups.Tier{}
	}
	b.floors[inst.SliceName()] = floor
}

// Populated goes by the manager's word: a unit not gone still holds its
// cgroup (KillMode=control-group stops it whole; the proof reads it).
func (b *Systemd) Populated(_ context.Context, _ layout.Proc, st Status) (bool, error) {
	return !st.Gone(), nil
}

// WatchEmpty observes the unit until it is gone.
func (b *Systemd) WatchEmpty(ctx context.Context, p layout.Proc) (<-chan struct{}, error) {
	ch := make(chan struct{})
	go func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			if st, err := b.Observe(ctx, p); err == nil && st.Gone() {
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
