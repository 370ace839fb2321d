package controllers

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// raceNodes are the two nodes the racers are placed on: the suite's agent
// and a second one in this process.
var raceNodes = [2]string{testNode, "node-race-b"}

// racers are n Instances named prefix-i, spread over two namespaces and
// the two race nodes.
func racers(prefix string, n int) []racer {
	out := make([]racer, n)
	for i := range out {
		ns := "default"
		if i%2 == 1 {
			ns = otherNamespace
		}
		out[i] = racer{ns: ns, name: fmt.Sprintf("%s-%d", prefix, i), node: raceNodes[(i/2)%2]}
	}
	return out
}

// settle waits until one racer holds host (the claim names it, it serves
// active) and every other reads HostInUse without naming it; it returns
// the holder.
func settle(t *testing.T, rs []racer, host string, active int64) racer {
	t.Helper()
	var holder racer
	testutil.Eventually(t, "one holder of "+host+", the others HostInUse", waitLimit, pollEvery, func() (bool, string) {
		held := claimHolder(t, host)
		holder = racer{}
		for _, r := range rs {
			if r.ns+"/"+r.name == held {
				holder = r
			}
		}
		if holder.name == "" {
			return false, "claim held by " + held
		}
		for _, r := range rs {
			inst := getRacer(t, r)
			if r == holder {
				if inst.Status.ActiveGeneration != active || !meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady) {
					return false, fmt.Sprintf("holder %s: active=%d %s", r.name, inst.Status.ActiveGeneration, conditionsOf(inst.Status.Conditions))
				}
				continue
			}
			stalled, leak := hostInUse(inst, holder)
			if leak != "" {
				t.Fatal(leak)
			}
			if !stalled {
				return false, fmt.Sprintf("%s/%s: %s", r.ns, r.name, conditionsOf(inst.Status.Conditions))
			}
		}
		return true, ""
	})
	return holder
}

// Ten Instances in two namespaces on two nodes are created at once with
// one host: exactly one holds it and runs; the nine others make no
// generation and read HostInUse without the holder's name.
func TestConcurrentCreatesOneHolder(t *testing.T) {
	ensureNamespace(t, otherNamespace)
	startSecondAgent(t, raceNodes[1])
	const host = "race-create.example.com"
	rs := racers("race-create", 10)
	t.Cleanup(func() { deleteRacers(t, rs) })
	concurrently(t, rs, func(r racer) error {
		inst := instance(r.name, func(in *v1.Instance) { in.Namespace, in.Spec.Host, in.Spec.NodeName = r.ns, host, r.node })
		return k8s.Create(context.Background(), inst)
	})
	holder := settle(t, rs, host, 1)
	for _, r := range rs {
		if gens := generationsOf(t, r); r != holder && len(gens) > 0 {
			t.Errorf("%s/%s made %d generations without the host", r.ns, r.name, len(gens))
		}
	}
}

// Ten running Instances are patched at once to one free host: exactly one
// moves to it (a new generation, its old host released once the old one
// is proven gone); the nine others keep serving their old host with
// generation 1 and read HostInUse. The holder's deletion hands the host
// to one of them.
func TestConcurrentHostChangesOneHolder(t *testing.T) {
	ensureNamespace(t, otherNamespace)
	startSecondAgent(t, raceNodes[1])
	const host = "race-patched.example.com"
	rs := racers("race-patch", 10)
	t.Cleanup(func() { deleteRacers(t, rs) })
	for _, r := range rs {
		create(t, instance(r.name, func(in *v1.Instance) { in.Namespace, in.Spec.NodeName = r.ns, r.node }))
	}
	for _, r := range rs {
		testutil.Eventually(t, r.name+" serving", waitLimit, pollEvery, func() (bool, string) {
			inst := getRacer(t, r)
			return inst.Status.ActiveGeneration == 1 && meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady), conditionsOf(inst.Status.Conditions)
		})
	}
	concurrently(t, rs, func(r racer) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			inst := &v1.Instance{}
			if err := k8s.Get(context.Background(), r.key(), inst); err != nil {
				return err
			}
			inst.Spec.Host = host
			return k8s.Update(context.Background(), inst)
		})
	})
	holder := settle(t, rs, host, 2)
	if g := generationsOf(t, holder); len(g) != 2 || g[1].Spec.Host != host {
		t.Fatalf("the holder's generations: %+v", g)
	}
	testutil.Eventually(t, "the holder's former host released", waitLimit, pollEvery, func() (bool, string) {
		held := claimHolder(t, holder.name+".example.com")
		return held == "", "still held by " + held
	})
	var waiting []racer
	for _, r := range rs {
		if r == holder {
			continue
		}
		waiting = append(waiting, r)
		gens := generationsOf(t, r)
		if len(gens) != 1 || gens[0].Spec.Retired || gens[0].Spec.Host != r.name+".example.com" {
			t.Errorf("%s/%s: want generation 1 serving its old host, have %+v", r.ns, r.name, gens)
		}
		if got := claimHolder(t, r.name+".example.com"); got != r.ns+"/"+r.name {
			t.Errorf("%s/%s's old host is held by %q", r.ns, r.name, got)
		}
	}
	deleteRacers(t, []racer{holder})
	settle(t, waiting, host, 2)
}
