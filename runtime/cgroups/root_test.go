package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRootLimits: a root not created bounds nothing; a root with limits
// reads them back, as the node's capacity takes them.
func TestRootLimits(t *testing.T) {
	cfg := testConfig(t)
	got, err := RootLimits(cfg)
	if err != nil {
		t.Fatal(err)
	}
	absent := Limits{MemoryBytes: Absent, Pids: Absent, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	if diff := cmp.Diff(absent, got); diff != "" {
		t.Errorf("limits of a root not created (-want,+got):\n%s", diff)
	}
	mode, h, err := detect(cfg.MountRoot)
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(mode, h)
	if err := d.create(cfg.root()); err != nil {
		t.Fatal(err)
	}
	if err := d.set(cfg.root(), Tier{MemoryBytes: 64 << 20, CPUMillis: 1500, Pids: 300}, false); err != nil {
		t.Fatal(err)
	}
	got, err = RootLimits(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tier{MemoryBytes: 64 << 20, CPUMillis: 1500, Pids: 300}, tierOf(got)); diff != "" {
		t.Errorf("limits of the root (-want,+got):\n%s", diff)
	}
}
