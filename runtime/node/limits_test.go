package node

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestParentLimits: a raise reaches the instance parent's files, and a
// restore brings back the floor the start asked for.
func TestParentLimits(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("limits", 1)
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	li, _ := e.lay.Instance(r.Namespace, r.Name)
	m, err := e.direct.Manager(li)
	if err != nil {
		t.Fatal(err)
	}
	read := func() int64 {
		l, err := m.Limits("")
		if err != nil {
			t.Fatal(err)
		}
		return l.MemoryBytes
	}
	if diff := cmp.Diff(r.Parent.MemoryBytes, read()); diff != "" {
		t.Errorf("floor after start (-want,+got):\n%s", diff)
	}
	if err := e.node.RaiseParent(ctx, r.InstanceRef, cgroups.Tier{MemoryBytes: 1 << 30, Pids: 128}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(int64(1<<30), read()); diff != "" {
		t.Errorf("after raise (-want,+got):\n%s", diff)
	}
	// Restored by a Node that started nothing (an agent just restarted):
	// the floor comes from the caller, not from the Node's memory.
	after, _ := e.newNode(t)
	defer after.Close()
	if err := after.RestoreParent(ctx, r.InstanceRef, r.Parent); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Parent.MemoryBytes, read()); diff != "" {
		t.Errorf("after restore (-want,+got):\n%s", diff)
	}
}
