package units

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
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

// An agent killed between making a generation's cgroup and recording its
// start leaves an empty child and no record: the next agent's start of
// that generation runs (nothing was handed to a shim). A child that holds
// a process is never taken over.
func TestDirectStartOverLeftoverChild(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	ctx := context.Background()

	p := makeProc(t, e.lay, "leftover", 2, "/bin/sleep", "1000")
	m, err := b.Manager(p.Instance())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureParent(cgroups.Tier{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateGeneration(2, cgroups.Tier{}); err != nil {
		t.Fatal(err)
	}
	got := b.Start(ctx, Spec{Slot: p})
	if got.Kind != outcome.Running {
		t.Fatalf("start over an empty, unrecorded child: %v (%v), want Running", got.Kind, got.Cause)
	}
	t.Cleanup(func() { _ = b.Kill(context.Background(), p) })

	busy := makeProc(t, e.lay, "leftover", 3, "/bin/sleep", "1000")
	child, err := m.CreateGeneration(3, cgroups.Tier{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := m.Place(cmd.Process.Pid, child); err != nil {
		t.Fatal(err)
	}
	if got := b.Start(ctx, Spec{Slot: busy}); got.Kind != outcome.NotStarted || !errors.Is(got.Cause, cgroups.ErrChildExists) {
		t.Errorf("start over a populated child: %v (%v), want NotStarted with ErrChildExists", got.Kind, got.Cause)
	}
}
