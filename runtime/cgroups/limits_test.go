package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

// On this host's v1 hierarchies, the tier lands in the real files of the
// parent and of g<n>; the role children carry none of their own.
func TestLimitsV1WrittenAndReadBack(t *testing.T) {
	cfg := testConfig(t)
	tier := Tier{MemoryBytes: 64 << 20, CPUMillis: 250, Pids: 32}
	m := newManager(t, cfg, "limits", tier)
	if m.Mode() == ModeV2 {
		t.Fatal("this test is the v1 path; the host is pure v2 (see TestV2)")
	}
	g1, err := m.CreateGeneration(1, tier)
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := m.CreateRole(sidecarChild(t, "side"))
	if err != nil {
		t.Fatal(err)
	}

	_, h, _ := detect("")
	_, cpuMounted := h["cpu"]
	wantTier := Limits{MemoryBytes: 64 << 20, Pids: 32, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	wantNone := Limits{MemoryBytes: Unlimited, Pids: Unlimited, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	if cpuMounted {
		wantTier.CPUQuotaMicros, wantTier.CPUPeriod, wantTier.CPUWeight = 25000, 100000, 256
		wantNone.CPUQuotaMicros, wantNone.CPUPeriod, wantNone.CPUWeight = Unlimited, 100000, 1024
	}
	tests := map[string]struct {
		child string
		want  Limits
	}{
		"parent floor is the tier":     {child: "", want: wantTier},
		"generation has the tier":      {child: g1, want: wantTier},
		"role child has no own limits": {child: sidecar, want: wantNone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := m.Limits(tc.child)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("limits (-want,+got):\n%s", diff)
			}
		})
	}

	// The same values straight from the kernel's files, not through Limits.
	dir := filepath.Join(m.Parent(), g1)
	if got := readFile(t, h["memory"], dir, "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Errorf("memory.limit_in_bytes = %s", got)
	}
	if got := readFile(t, h["pids"], dir, "pids.max"); got != "32" {
		t.Errorf("pids.max = %s", got)
	}
	if cpuMounted {
		if got := readFile(t, h["cpu"], dir, "cpu.cfs_quota_us"); got != "25000" {
			t.Errorf("cpu.cfs_quota_us = %s", got)
		}
	}
}

func TestChildrenAreFreshAndNamed(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "fresh", Tier{Pids: 16})
	if _, err := m.CreateGeneration(0, Tier{}); !errors.Is(err, layout.ErrNotAGeneration) {
		t.Errorf("generation 0: %v, want ErrNotAGeneration", err)
	}
	if _, err := m.CreateGeneration(1, Tier{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateGeneration(1, Tier{}); !errors.Is(err, ErrChildExists) {
		t.Errorf("second g1: %v, want ErrChildExists", err)
	}
	if _, err := m.CreateRole(seedChild(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateRole(seedChild(t)); !errors.Is(err, ErrChildExists) {
		t.Errorf("second role-seed: %v, want ErrChildExists", err)
	}
	for _, child := range []string{"g1", "role-sidecar", "role-run", "x"} {
		if _, err := m.CreateRole(child); !errors.Is(err, ErrNotAChild) {
			t.Errorf("CreateRole(%q): %v, want ErrNotAChild", child, err)
		}
	}
	other, err := New(cfg, "ns", "noparent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateGeneration(1, Tier{}); !errors.Is(err, ErrParentAbsent) {
		t.Errorf("child without parent: %v, want ErrParentAbsent", err)
	}
	// Removing lets the next generation start in a fresh directory.
	if err := m.RemoveChild("g1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateGeneration(1, Tier{}); err != nil {
		t.Errorf("g1 after removal: %v", err)
	}
}

// A process over its pids limit is refused: the fork fails in the kernel.
func TestPidsLimitRefusesFork(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "pids", Tier{Pids: 64})
	g1, err := m.CreateGeneration(1, Tier{Pids: 4})
	if err != nil {
		t.Fatal(err)
	}
	h := startHeld(t, `for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1000 & done; wait`)
	if err := m.Place(h.pid(), g1); err != nil {
		t.Fatal(err)
	}
	h.release(t)
	_, hier, _ := detect("")
	events := func() string {
		return readFile(t, hier["pids"], m.Parent(), g1, "pids.events")
	}
	waitFor(t, "a refused fork in pids.events", func() bool { return events() != "max 0" })
	pids, err := m.Pids(g1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 4 {
		t.Errorf("%d processes in %s, limit 4", len(pids), g1)
	}
}

// EnsureParent skips work only while nothing it wrote can have changed:
// the same tier again leaves the files alone, a new tier is written, and
// a parent removed behind its back is made again.
func TestEnsureParentAgain(t *testing.T) {
	cfg := testConfig(t)
	first := Tier{MemoryBytes: 64 << 20, Pids: 32}
	m := newManager(t, cfg, "again", first)
	_, h, _ := detect("")
	pidsDir := h["pids"]
	if m.Mode() == ModeV2 {
		pidsDir = h[""]
	}
	// A value changed by hand is not rewritten by a repeat call: the
	// repeat did no file work.
	if err := os.WriteFile(filepath.Join(pidsDir, m.Parent(), "pids.max"), []byte("33"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureParent(first); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, pidsDir, m.Parent(), "pids.max"); got != "33" {
		t.Errorf("same tier again: pids.max = %s, want the untouched 33", got)
	}
	second := Tier{MemoryBytes: 64 << 20, Pids: 40}
	if err := m.EnsureParent(second); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, pidsDir, m.Parent(), "pids.max"); got != "40" {
		t.Errorf("new tier: pids.max = %s, want 40", got)
	}
	if err := m.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureParent(second); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, pidsDir, m.Parent(), "pids.max"); got != "40" {
		t.Errorf("after removal: pids.max = %s, want 40", got)
	}
}
