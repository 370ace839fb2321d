package node

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestUsageSumsGenerations: Usage sums each Instance's held generations
// (two during an overlap), keeps the highest limit, and leaves out a
// retired generation and the other slots.
func TestUsageSumsGenerations(t *testing.T) {
	e := newFakeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := func(name string, n int64, st cgroups.Stats) {
		e.start(ctx, t, name, n)
		e.units.SetStats(e.proc(t, GenerationRef("default", name, n)), st)
	}
	set("shop", 1, cgroups.Stats{MemoryWorkingSetBytes: 100, CPUUsageNanos: 2e9, OOMKills: 1, MemoryLimitBytes: 256 << 20})
	set("shop", 2, cgroups.Stats{MemoryWorkingSetBytes: 50, CPUUsageNanos: 1e9, MemoryLimitBytes: 512 << 20})
	set("blog", 1, cgroups.Stats{MemoryWorkingSetBytes: 7, CPUUsageNanos: 3, MemoryLimitBytes: cgroups.Unlimited})
	set("gone", 1, cgroups.Stats{MemoryWorkingSetBytes: 9})
	if k := e.node.Retire(ctx, GenerationRef("default", "gone", 1), 100*time.Millisecond); !k.Proven {
		t.Fatalf("retire: %+v", k)
	}

	got := map[string]InstanceUsage{}
	for _, u := range e.node.Usage(ctx) {
		got[u.Name] = u
	}
	want := map[string]InstanceUsage{
		"shop": {InstanceRef: InstanceRef{"default", "shop"}, Generations: 2,
			Stats: cgroups.Stats{MemoryWorkingSetBytes: 150, CPUUsageNanos: 3e9, OOMKills: 1, MemoryLimitBytes: 512 << 20}},
		"blog": {InstanceRef: InstanceRef{"default", "blog"}, Generations: 1,
			Stats: cgroups.Stats{MemoryWorkingSetBytes: 7, CPUUsageNanos: 3, MemoryLimitBytes: cgroups.Unlimited}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want,+got):\n%s", diff)
	}
}

// TestObserveReadsOOMKillsOfAnEndedSlot: the OOM kills are read once
// the slot ended, not while it runs.
func TestObserveReadsOOMKillsOfAnEndedSlot(t *testing.T) {
	e := newFakeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.start(ctx, t, fakeGen1.Name, 1)
	p := e.proc(t, fakeGen1)
	e.units.SetStats(p, cgroups.Stats{OOMKills: 2, MemoryLimitBytes: 16 << 20})
	st, err := e.node.Observe(ctx, fakeGen1)
	if err != nil {
		t.Fatal(err)
	}
	if st.OOM != nil {
		t.Errorf("OOM of a running slot = %+v, want nil", st.OOM)
	}
	if err := e.units.Exit(p, outcome.Exit{Result: "signal", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if st, err = e.node.Observe(ctx, fakeGen1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&OOM{Kills: 2, MemoryLimitBytes: 16 << 20}, st.OOM); diff != "" {
		t.Errorf("OOM of the ended slot (-want,+got):\n%s", diff)
	}
}
