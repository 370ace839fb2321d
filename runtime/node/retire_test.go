package node

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// stuckKill is a backend whose stop and kill return only when their
// context ends: how a unit with a process that will not die looks from
// the node. Prove is the real backend's.
type stuckKill struct{ units.Backend }

func (stuckKill) Stop(ctx context.Context, _ layout.Slot) error { <-ctx.Done(); return ctx.Err() }
func (stuckKill) Kill(ctx context.Context, _ layout.Slot) error { <-ctx.Done(); return ctx.Err() }

// TestRetireBoundsTheKill: with a caller's context that never ends (a
// reconciler's), the kill after a failed stop is bounded, so the proof,
// with its own budget, runs and decides: a kill that cannot be proven
// becomes KillUnproven instead of a Retire that never returns.
func TestRetireBoundsTheKill(t *testing.T) {
	e := newEnv(t)
	n, err := New(Config{Layout: e.lay, Backend: stuckKill{e.direct}, SocketGID: -1, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("stuck", 1)
	e.retireAtEnd(t, r.Ref)
	if s := n.Start(ctx, r); s.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", s.Start.Kind, s.Start.Cause)
	}
	waitReady(ctx, t, n, r.Ref)

	done := make(chan outcome.Kill, 1)
	go func() { done <- n.Retire(context.Background(), r.Ref, time.Second) }()
	select {
	case k := <-done:
		if !k.Proven {
			t.Fatalf("the real backend's proof did not prove the app gone: %v", k.Err())
		}
	case <-time.After(25 * time.Second): // a hang guard, not a speed target
		t.Fatal("Retire still waits in the kill after its grace: the proof never runs")
	}
}
