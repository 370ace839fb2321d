package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// The instance parent's limits are the tier a tenant pays for: a run
// never changes them, and an overlap's raise outlives the agent that made
// it. The tests here run on both backends.

var (
	genTier     = cgroups.Tier{MemoryBytes: 96 << 20, Pids: 40}
	parentTier  = cgroups.Tier{MemoryBytes: 192 << 20, Pids: 80, CPUMillis: 500}
	overlapTier = cgroups.Tier{MemoryBytes: 384 << 20, Pids: 160, CPUMillis: 1000}
)

// parentFiles reads the limits of p's instance parent (the slice, on
// systemd) from its host cgroup files.
func parentFiles(ctx context.Context, t *testing.T, be testBackend, b Backend, p layout.Slot) map[string]string {
	t.Helper()
	st, err := b.Observe(ctx, p)
	if err != nil || st.Cgroup == "" {
		t.Fatalf("observe %s: %+v, %v", p.UnitName(), st, err)
	}
	parent := path.Dir(st.Cgroup)
	read := func(hierarchy, file string) string {
		return strings.TrimSpace(readFile(t, filepath.Join(be.hostDir(hierarchy, parent), file)))
	}
	return map[string]string{
		"memory.limit_in_bytes": read("memory", "memory.limit_in_bytes"),
		"pids.max":              read("pids", "pids.max"),
		"cpu.cfs_quota_us":      read("cpu", "cpu.cfs_quota_us"),
	}
}

// tierFiles is what parentFiles reads of a parent at t (every field set).
func tierFiles(t cgroups.Tier) map[string]string {
	return map[string]string{
		"memory.limit_in_bytes": fmt.Sprint(t.MemoryBytes),
		"pids.max":              fmt.Sprint(t.Pids),
		"cpu.cfs_quota_us":      fmt.Sprint(t.CPUMillis * 100), // a 100ms period
	}
}

// startOrFail starts spec on b, proven gone by b at the test's end.
func startOrFail(ctx context.Context, t *testing.T, b Backend, spec Spec) {
	t.Helper()
	if got := b.Start(ctx, spec); got.Kind != outcome.Running {
		t.Fatalf("start %s: %v (%v)", spec.Slot.UnitName(), got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), spec.Slot) })
}

// A run (a command's unit, started with no parent tier as Node.Run starts
// it) beside a running generation leaves the parent at the Instance's
// tier, whether the agent that runs it started the generation or was
// restarted since.
func TestRunKeepsParentLimits(t *testing.T) {
	tests := map[string]struct {
		restarted bool
	}{
		"a run by the agent that started the generation": {},
		"a run by a restarted agent":                     {restarted: true},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inst := fmt.Sprintf("runlimits%d", i)
		b := be.new(t, 10*time.Second)
		g1 := makeProc(t, be.lay, inst, 1, "/bin/sleep", "1000")
		startOrFail(ctx, t, b, Spec{Slot: g1, Tier: genTier, Parent: parentTier, Grace: time.Second})
		if diff := cmp.Diff(tierFiles(parentTier), parentFiles(ctx, t, be, b, g1)); diff != "" {
			t.Fatalf("parent after the generation's start (-want,+got):\n%s", diff)
		}
		if tests[name].restarted {
			b = be.new(t, 10*time.Second)
		}
		run := makeSlot(t, be.lay, inst, func(li layout.Instance) (layout.Slot, error) { return li.Command("once") }, "/bin/sleep", "1000")
		startOrFail(ctx, t, b, Spec{Slot: run, Grace: time.Second})
		if diff := cmp.Diff(tierFiles(parentTier), parentFiles(ctx, t, be, b, g1)); diff != "" {
			t.Errorf("parent beside the run (-want,+got):\n%s", diff)
		}
	})
}

// A run of an Instance whose parent is not there is refused: made by the
// run, the parent would hold no limit, and the generation started into it
// next would keep it so.
func TestRunNeedsTheInstanceParent(t *testing.T) {
	eachCase(t, map[string]struct{}{"no parent": {}}, func(t *testing.T, be testBackend, i int, _ string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := be.new(t, 10*time.Second)
		run := makeSlot(t, be.lay, fmt.Sprintf("noparent%d", i), func(li layout.Instance) (layout.Slot, error) { return li.Command("once") }, "/bin/true")
		got := b.Start(ctx, Spec{Slot: run, Grace: time.Second})
		t.Cleanup(func() { b.Prove(context.Background(), run) })
		if got.Kind != outcome.NotStarted {
			t.Fatalf("run with no instance parent: %v (%v), want NotStarted", got.Kind, got.Cause)
		}
		if exists := parentExists(ctx, t, b, run.Instance()); exists {
			t.Errorf("the refused run left an instance parent behind")
		}
	})
}

// parentExists: the instance's slice is active (systemd), or its parent
// cgroup is there (direct).
func parentExists(ctx context.Context, t *testing.T, b Backend, inst layout.Instance) bool {
	t.Helper()
	switch b := b.(type) {
	case *Systemd:
		c, err := b.connection(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, err := b.observeSlice(ctx, c, inst.SliceName())
		if err != nil {
			t.Fatal(err)
		}
		return st.active
	default:
		_, err := os.Stat(hostCgroup("memory", inst.Cgroup()))
		return err == nil
	}
}

// An agent restarted in the middle of an overlap keeps the raised parent
// limit while both generations run (whether it starts the successor or a
// sidecar beside both), refuses to restore it until the old one is gone,
// then restores the tier.
func TestOverlapRaiseOutlivesTheAgent(t *testing.T) {
	tests := map[string]struct {
		restartBeforeSuccessor bool
	}{
		"the new agent starts a sidecar beside both generations": {},
		"the new agent starts the successor":                     {restartBeforeSuccessor: true},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		inst := fmt.Sprintf("overlap%d", i)
		old := be.new(t, 10*time.Second)
		g1 := makeProc(t, be.lay, inst, 1, "/bin/sleep", "1000")
		g2 := makeProc(t, be.lay, inst, 2, "/bin/sleep", "1000")
		side := makeSlot(t, be.lay, inst, func(li layout.Instance) (layout.Slot, error) { return li.Sidecar("side") }, "/bin/sleep", "1000")
		startOrFail(ctx, t, old, Spec{Slot: g1, Tier: genTier, Parent: parentTier, Grace: time.Second})
		if err := old.RaiseParent(ctx, g1.Instance(), overlapTier); err != nil {
			t.Fatal(err)
		}
		if !tc.restartBeforeSuccessor {
			startOrFail(ctx, t, old, Spec{Slot: g2, Tier: genTier, Parent: parentTier, Grace: time.Second})
		}
		b := be.new(t, 10*time.Second) // the restarted agent
		if tc.restartBeforeSuccessor {
			startOrFail(ctx, t, b, Spec{Slot: g2, Tier: genTier, Parent: parentTier, Grace: time.Second})
		} else {
			startOrFail(ctx, t, b, Spec{Slot: side, Parent: parentTier, Grace: time.Second})
		}
		if diff := cmp.Diff(tierFiles(overlapTier), parentFiles(ctx, t, be, b, g1)); diff != "" {
			t.Fatalf("parent while both generations run (-want,+got):\n%s", diff)
		}

		var pe *cgroups.PopulatedError
		if err := b.RestoreParent(ctx, g1.Instance(), parentTier); !errors.As(err, &pe) || len(pe.Children) != 2 {
			t.Fatalf("RestoreParent while both generations run = %v, want *cgroups.PopulatedError naming two", err)
		}
		if diff := cmp.Diff(tierFiles(overlapTier), parentFiles(ctx, t, be, b, g1)); diff != "" {
			t.Fatalf("parent after a refused restore (-want,+got):\n%s", diff)
		}

		if k := b.Prove(ctx, g1); !k.Proven {
			t.Fatalf("prove generation 1 gone: %v", k.Err())
		}
		if err := b.RestoreParent(ctx, g1.Instance(), parentTier); err != nil {
			t.Fatalf("RestoreParent once generation 1 is gone: %v", err)
		}
		if diff := cmp.Diff(tierFiles(parentTier), parentFiles(ctx, t, be, b, g2)); diff != "" {
			t.Errorf("parent once generation 1 is gone (-want,+got):\n%s", diff)
		}
		if st, err := b.Observe(ctx, g2); err != nil || st.Gone() {
			t.Errorf("generation 2 after the restore: %+v, %v; want running", st, err)
		}
	})
}
