package units

import (
	"context"
	"testing"
	"time"
)

// The backend keeps a cgroup manager per Instance while it has one, and
// lets it go with the Instance's cgroups: a node that hosted a thousand
// Instances over its life does not hold a thousand managers.
func TestDirectForgetsRemovedParents(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		p, _ := startRunning(t, e, b, name, 1)
		if err := b.Kill(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := b.RemoveParent(ctx, p.Instance()); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.managers) != 0 {
		t.Errorf("%d managers kept after their Instances' cgroups were removed, want 0", len(b.managers))
	}
}
