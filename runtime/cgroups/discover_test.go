package cgroups

import (
	"context"
	"path"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

// After an agent restart, the parents, children and processes come back
// from the file system alone.
func TestDiscoverFromFileSystem(t *testing.T) {
	cfg := testConfig(t)
	a := newManager(t, cfg, "a", Tier{})
	b := newManager(t, cfg, "b", Tier{})
	ga, _ := a.CreateGeneration(3, Tier{})
	seed, _ := a.CreateRole(seedChild(t))
	gb, _ := b.CreateGeneration(1, Tier{})
	pa := spawnIn(t, a, ga, "exec sleep 1000", 1)
	pb := spawnIn(t, b, gb, "exec sleep 1000", 1)

	got, err := Discover(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []Discovered{
		{Parent: a.Parent(), Name: path.Base(a.Parent()), Children: []DiscoveredChild{
			{Name: ga, Generation: 3, Pids: []int{pa.pid()}},
			{Name: seed},
		}},
		{Parent: b.Parent(), Name: path.Base(b.Parent()), Children: []DiscoveredChild{
			{Name: gb, Generation: 1, Pids: []int{pb.pid()}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Discover (-want,+got):\n%s", diff)
	}
	// One parent alone is what Discover says of it; a missing one is empty.
	for _, w := range append(want, Discovered{Parent: path.Join(cfg.Root, "unitlet-ns_none"), Name: "unitlet-ns_none"}) {
		one, err := DiscoverParent(cfg, w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, one); diff != "" {
			t.Errorf("DiscoverParent(%s) (-want,+got):\n%s", w.Name, diff)
		}
	}
}

// The sweep kills and removes what matches its prefix and is not kept,
// and nothing else.
func TestSweepStaleByPrefix(t *testing.T) {
	cfg := testConfig(t)
	stale := newManager(t, cfg, "stale", Tier{})
	kept := newManager(t, cfg, "kept", Tier{})
	gs, _ := stale.CreateGeneration(1, Tier{})
	gk, _ := kept.CreateGeneration(1, Tier{})
	ps := spawnIn(t, stale, gs, treeScript, 101)
	pk := spawnIn(t, kept, gk, "exec sleep 1000", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keep := func(name string) bool { return name == path.Base(kept.Parent()) }
	proofs, err := SweepStale(ctx, cfg, layout.CgroupPrefix, keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(proofs) != 1 || !proofs[0].Proven || proofs[0].Child != stale.Parent() {
		t.Fatalf("proofs = %+v, want one proven for %s", proofs, stale.Parent())
	}
	found, err := Discover(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Parent != kept.Parent() {
		t.Fatalf("after sweep: %+v, want only %s", found, kept.Parent())
	}
	if alive(ps.pid()) || !alive(pk.pid()) {
		t.Errorf("stale alive=%v (want false), kept alive=%v (want true)", alive(ps.pid()), alive(pk.pid()))
	}
	if _, err := SweepStale(ctx, cfg, "", nil); err == nil {
		t.Error("a sweep with an empty prefix must refuse")
	}
}
