package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestRemove refuses while a slot runs, and afterwards leaves no
// directory and no cgroup of the instance.
func TestRemove(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("gone", 1)
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)
	if _, err := e.node.Promote(ctx, r.Ref); err != nil {
		t.Fatal(err)
	}
	err := e.node.Remove(ctx, r.InstanceRef)
	var pe *PopulatedError
	if !errors.Is(err, ErrPopulated) || !errors.As(err, &pe) || len(pe.Units) != 1 {
		t.Fatalf("remove while running: %v, want a PopulatedError naming one unit", err)
	}
	waitReady(ctx, t, e.node, r.Ref) // a refused Remove touched nothing

	if k := e.node.Retire(ctx, r.Ref, time.Second); !k.Proven {
		t.Fatalf("retire: %v", k.Err())
	}
	if err := e.node.Remove(ctx, r.InstanceRef); err != nil {
		t.Fatalf("remove: %v", err)
	}
	li, err := e.lay.Instance(r.Namespace, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	left := []string{li.DataDir(), li.PrivateDir(), li.RunDir(), li.LogDir(), filepath.Dir(li.LogFile())}
	for _, h := range []string{"memory", "pids", "unified"} {
		left = append(left, filepath.Join(cgroups.DefaultMountRoot, h, li.Cgroup()))
	}
	for _, p := range left {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after Remove (%v)", p, err)
		}
	}
	if err := e.node.Remove(ctx, r.InstanceRef); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}
