package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestReconcilersWaitForAdoption: while a (re)started agent's adoption
// runs, no reconcile acts. Adoption restores each Instance's fence from
// the cache; a promotion made meanwhile would be undone by it, leaving
// the stable socket on a retired generation (the chaos suite saw it).
func TestReconcilersWaitForAdoption(t *testing.T) {
	const node = "node-adopting"
	rt := newFakeRuntime()
	rt.listGate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	if err := startAgent(ctx, node, rt); err != nil {
		t.Fatal(err)
	}
	inst := instance("adopting", func(i *v1.Instance) { i.Spec.NodeName = node })
	create(t, inst)
	t.Cleanup(func() {
		kube.DeleteAndWait(t, inst.Name, waitLimit)
		cancel()
	})
	time.Sleep(time.Second)
	if calls := rt.Calls(inst.Name); len(calls) > 0 {
		t.Fatalf("the runtime was called before adoption ended: %v", calls)
	}
	close(rt.listGate)
	testutil.Eventually(t, "the Instance started once adoption ended", waitLimit, pollEvery, func() (bool, string) {
		calls := rt.Calls(inst.Name)
		return len(calls) > 0, fmt.Sprint(calls)
	})
}
