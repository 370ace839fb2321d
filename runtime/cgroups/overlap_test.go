package cgroups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The overlap swap: raise the parent, place the successor, refuse to
// restore while the old generation runs, kill it, restore.
func TestOverlapRaiseKillRestore(t *testing.T) {
	cfg := testConfig(t)
	tier := Tier{MemoryBytes: 64 << 20, Pids: 32}
	overlap := Tier{MemoryBytes: 128 << 20, Pids: 64}
	m := newManager(t, cfg, "overlap", tier)
	g1, _ := m.CreateGeneration(1, tier)
	spawnIn(t, m, g1, "exec sleep 1000", 1)

	parentLimits := func() (int64, int64) {
		l, err := m.Limits("")
		if err != nil {
			t.Fatal(err)
		}
		return l.MemoryBytes, l.Pids
	}
	if err := m.RaiseParent(overlap); err != nil {
		t.Fatal(err)
	}
	if mem, pids := parentLimits(); mem != overlap.MemoryBytes || pids != overlap.Pids {
		t.Fatalf("raised parent = %d, %d", mem, pids)
	}
	// Ensuring the parent again (a reconcile) does not lower a raise.
	if err := m.EnsureParent(tier); err != nil {
		t.Fatal(err)
	}
	if mem, _ := parentLimits(); mem != overlap.MemoryBytes {
		t.Fatalf("EnsureParent lowered a raised parent to %d", mem)
	}

	g2, err := m.CreateGeneration(2, tier)
	if err != nil {
		t.Fatal(err)
	}
	successor := spawnIn(t, m, g2, "exec sleep 1000", 1)

	err = m.RestoreParent(tier)
	var pe *PopulatedError
	if !errors.As(err, &pe) {
		t.Fatalf("RestoreParent with two generations running = %v, want *PopulatedError", err)
	}
	if diff := cmp.Diff([]string{g1, g2}, pe.Children); diff != "" {
		t.Errorf("populated children (-want,+got):\n%s", diff)
	}
	if mem, _ := parentLimits(); mem != overlap.MemoryBytes {
		t.Fatalf("refused restore still lowered the parent to %d", mem)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p := m.KillAndEmpty(ctx, g1); !p.Proven {
		t.Fatalf("kill g1: %v", p.Error())
	}
	if err := m.RestoreParent(tier); err != nil {
		t.Fatal(err)
	}
	if mem, pids := parentLimits(); mem != tier.MemoryBytes || pids != tier.Pids {
		t.Fatalf("restored parent = %d, %d; want the tier", mem, pids)
	}
	if !alive(successor.pid()) {
		t.Error("the successor died")
	}
	if err := m.RemoveChild(g1); err != nil {
		t.Fatal(err)
	}
}

func TestRaiseWithoutDelegationRefuses(t *testing.T) {
	cfg := testConfig(t)
	m, err := New(cfg, "ns", "never-ensured")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RaiseParent(Tier{MemoryBytes: 1 << 30}); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("RaiseParent without a parent = %v, want ErrNoDelegation", err)
	}
	if err := m.RestoreParent(Tier{MemoryBytes: 1 << 30}); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("RestoreParent without a parent = %v, want ErrNoDelegation", err)
	}
}

// A manager that did not make the raise (an agent restarted during an
// overlap) reads it back from the parent: its EnsureParent keeps it while
// a generation runs, its RestoreParent is refused while two do, and it
// restores the tier once the old one is gone.
func TestOverlapRaiseOutlivesManager(t *testing.T) {
	cfg := testConfig(t)
	tier := Tier{MemoryBytes: 64 << 20, Pids: 32, CPUMillis: 500}
	overlap := Tier{MemoryBytes: 128 << 20, Pids: 64, CPUMillis: 1000}
	first := newManager(t, cfg, "outlive", tier)
	g1, _ := first.CreateGeneration(1, tier)
	spawnIn(t, first, g1, "exec sleep 1000", 1)
	if err := first.RaiseParent(overlap); err != nil {
		t.Fatal(err)
	}
	// The restarted agent's manager ensures the parent before it starts
	// the successor, and again (a sidecar) once both run.
	m := newManager(t, cfg, "outlive", tier)
	g2, err := m.CreateGeneration(2, tier)
	if err != nil {
		t.Fatal(err)
	}
	successor := spawnIn(t, m, g2, "exec sleep 1000", 1)
	if err := m.EnsureParent(tier); err != nil {
		t.Fatal(err)
	}
	parent := func() Tier {
		l, err := m.Limits("")
		if err != nil {
			t.Fatal(err)
		}
		return Tier{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMillis: l.CPUQuotaMicros * 1000 / l.CPUPeriod}
	}
	if diff := cmp.Diff(overlap, parent()); diff != "" {
		t.Fatalf("parent while both generations run (-want,+got):\n%s", diff)
	}
	var pe *PopulatedError
	if err := m.RestoreParent(tier); !errors.As(err, &pe) {
		t.Fatalf("RestoreParent with two generations running = %v, want *PopulatedError", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p := m.KillAndEmpty(ctx, g1); !p.Proven {
		t.Fatalf("kill g1: %v", p.Error())
	}
	if err := m.RestoreParent(tier); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tier, parent()); diff != "" {
		t.Errorf("parent once g1 is gone (-want,+got):\n%s", diff)
	}
	if !alive(successor.pid()) {
		t.Error("the successor died")
	}
}
