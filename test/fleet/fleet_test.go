package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/nodelease"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

const (
	nodeA, nodeB, nodeC = "fleet-a", "fleet-b", "fleet-c"
	// fleetSize is the unpinned Instances placed: a third may never move,
	// a sixth must land on zone b.
	fleetSize = 60
)

// fleet is the state the steps share.
type fleet struct {
	// root is the whole suite's test: what must outlive one step (the
	// agents, the router's listeners) is cleaned up when it ends.
	root   *testing.T
	nodes  map[string]*node
	names  []string
	router *router
	// movedByDrain are the Instances the drain of nodeA moved, with the
	// body each answered before.
	movedByDrain map[string]string
	// lost are the movable Instances the lost node held; lostNever its
	// unmovable ones.
	lost, lostNever []string
}

func TestFleet(t *testing.T) {
	f := &fleet{root: t, nodes: map[string]*node{}, movedByDrain: map[string]string{}}
	f.router = newRouter(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster side log (tail):\n%s", clusterTail(60))
		}
	})
	testutil.RunSteps(t, "fleet", []testutil.Step{
		{Name: "three nodes join", Run: f.join},
		{Name: "the node VM joins", Run: f.joinVM},
		{Name: "60 unpinned Instances spread within capacity and selectors", Run: f.place},
		{Name: "one that fits nowhere is Unschedulable with the reasons", Run: f.unschedulable},
		{Name: "cordon and drain a node under load", Run: f.drain},
		{Name: "a lost node's movable Instances run elsewhere", Run: f.lose},
		{Name: "the lost node returns and retires what moved", Run: f.returns},
		{Name: "the instance key across moves, tampering and rotation", Run: f.key},
		{Name: "the node VM's apps run with their minted key", Run: f.vmKeys},
	})
}

func (f *fleet) join(t *testing.T) {
	for name, zone := range map[string]string{nodeA: "a", nodeB: "a", nodeC: "b"} {
		f.nodes[name] = startNode(t, f.root, name, map[string]string{"zone": zone})
	}
}

// place applies fleetSize Instances without a node: a third with moves
// Never, a sixth selecting zone b, three apps to spread; the last few
// select the node VM, whose guest is emulated: they ask a tier the
// trampoline starts in there, and they are applied once the others are
// placed (the VM is cordoned until then), so that no small-CPU Instance
// lands on it.
func (f *fleet) place(t *testing.T) {
	apps := []string{"alpha", "beta", "gamma"}
	for i := range fleetSize - vmShare {
		moves := v1.MovesAllowed
		if i%3 == 2 {
			moves = v1.MovesNever
		}
		inst := appInstance(fmt.Sprintf("app-%02d", i), apps[i%len(apps)], moves)
		if i%6 == 0 {
			inst.Spec.Placement.NodeSelector = map[string]string{"zone": "b"}
		}
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
		f.names = append(f.names, inst.Name)
	}
	waitAllServing(t, f.names, 4*time.Minute)
	if run := testutil.Plugin(t, kubeconfig, "uncordon", nodeVM); run.Code() != 0 {
		t.Fatalf("uncordon %s: %s%s", nodeVM, run.Stdout(), run.Stderr())
	}
	for i := range vmShare {
		inst := vmInstance(fmt.Sprintf("app-vm-%d", i), apps[i%len(apps)])
		inst.Spec.Placement.NodeSelector = map[string]string{"zone": "vm"}
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
		f.names = append(f.names, inst.Name)
	}
	waitAllServing(t, f.names, 5*time.Minute)

	perNode := map[string]int{}
	perApp := map[string]sets.Set[string]{}
	for _, inst := range listInstances(t) {
		if !strings.HasPrefix(inst.Name, "app-") {
			continue
		}
		on := inst.Status.NodeName
		if on != inst.Spec.NodeName {
			t.Errorf("%s serves on %s but is bound to %s", inst.Name, on, inst.Spec.NodeName)
		}
		if zone := inst.Spec.Placement.NodeSelector["zone"]; (zone == "b" && on != nodeC) || (zone == "vm" && on != nodeVM) {
			t.Errorf("%s selects zone %s and runs on %s", inst.Name, zone, on)
		}
		if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionScheduled); c == nil || c.Status != "True" || c.Reason != v1.ReasonBound {
			t.Errorf("%s: Scheduled = %v, want True/Bound", inst.Name, c)
		}
		perNode[on]++
		if perApp[inst.Labels["app"]] == nil {
			perApp[inst.Labels["app"]] = sets.New[string]()
		}
		perApp[inst.Labels["app"]].Insert(on)
	}
	t.Logf("Instances per node: %v", perNode)
	for app, nodes := range perApp {
		if nodes.Len() < 3 {
			t.Errorf("app %s spread over %v, want at least three nodes", app, sets.List(nodes))
		}
	}
	for _, name := range []string{nodeA, nodeB, nodeC, nodeVM} {
		if perNode[name] == 0 {
			t.Errorf("node %s got no Instance: %v", name, perNode)
		}
		f.checkAllocated(t, name, perNode[name])
	}
}

// checkAllocated waits until the node's Enrollment reports its Instances'
// tiers as allocated, within what it offers.
func (f *fleet) checkAllocated(t *testing.T, name string, count int) {
	t.Helper()
	want := tierMemory.DeepCopy()
	want.Mul(int64(count))
	testutil.Eventually(t, "Enrollment "+name+" reports its allocation", time.Minute, 500*time.Millisecond, func() (bool, string) {
		enr := enrollment(t, name)
		got := enr.Status.Allocated[corev1.ResourceMemory]
		if got.Cmp(want) != 0 {
			return false, fmt.Sprintf("allocated memory %s, want %s (%d Instances)", got.String(), want.String(), count)
		}
		if alloc := enr.Status.Allocatable[corev1.ResourceMemory]; got.Cmp(alloc) > 0 {
			return false, fmt.Sprintf("allocated %s beyond allocatable %s", got.String(), alloc.String())
		}
		return true, ""
	})
}

func (f *fleet) unschedulable(t *testing.T) {
	inst := appInstance("too-big", "alpha", v1.MovesAllowed)
	inst.Spec.Template.Tier.Memory = resource.MustParse("100Gi")
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "too-big Unschedulable", time.Minute, pollEvery, func() (bool, string) {
		got := getInstance(t, "too-big")
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionScheduled)
		if c == nil || c.Status != "False" || c.Reason != v1.ReasonUnschedulable {
			return false, testutil.Conditions(got.Status.Conditions)
		}
		if !strings.Contains(c.Message, "0/4 nodes are available") || !strings.Contains(c.Message, "insufficient memory") {
			return false, "message: " + c.Message
		}
		return got.Spec.NodeName == "", "bound to " + got.Spec.NodeName
	})
}

// onNode are the names of Instances serving on node, by moves.
func onNode(t *testing.T, names []string, node string) (allowed, never []string) {
	for _, n := range names {
		inst := getInstance(t, n)
		if inst.Status.NodeName != node {
			continue
		}
		if inst.Spec.MovesAllowed() {
			allowed = append(allowed, n)
		} else {
			never = append(never, n)
		}
	}
	sort.Strings(allowed)
	sort.Strings(never)
	return allowed, never
}

// lose kills nodeB's agent (SIGKILL: its apps live on, its Lease runs
// out) and waits until its movable Instances serve elsewhere.
func (f *fleet) lose(t *testing.T) {
	allowed, never := onNode(t, f.names, nodeB)
	if len(allowed) == 0 || len(never) == 0 {
		t.Fatalf("node %s holds %d movable and %d unmovable Instances; the step needs both", nodeB, len(allowed), len(never))
	}
	f.nodes[nodeB].Stop(syscall.SIGKILL)
	killed := time.Now()
	// The Lease runs out nodelease.Duration after its last renewal; the
	// issue's bound is lostAfterSeconds (5) + 30 s after that.
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: leaseNS, Name: nodeB}, lease); err != nil {
		t.Fatal(err)
	}
	expiry, ok := nodelease.Expiry(lease)
	if !ok {
		t.Fatalf("node %s's Lease has no renewal: %+v", nodeB, lease.Spec)
	}
	limit := time.Until(expiry.Add(5*time.Second + 30*time.Second))
	testutil.Eventually(t, "node "+nodeB+"'s movable Instances serving elsewhere", limit, 500*time.Millisecond, func() (bool, string) {
		for _, n := range allowed {
			inst := getInstance(t, n)
			if !serving(inst) || inst.Status.NodeName == nodeB {
				return false, n + ": on " + inst.Status.NodeName + ": " + testutil.Conditions(inst.Status.Conditions)
			}
		}
		return true, ""
	})
	t.Logf("the Lease ran out %s after the kill; its movable Instances served elsewhere %s after that",
		expiry.Sub(killed).Round(time.Second), time.Since(expiry).Round(time.Second))
	claimsFollow(t, allowed)
	for _, n := range never {
		inst := getInstance(t, n)
		c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReady)
		if inst.Spec.NodeName != nodeB || c == nil || c.Status != "Unknown" || c.Reason != v1.ReasonNodeLost {
			t.Errorf("%s (moves Never): node %s, Ready %v; want it kept on %s, Unknown/NodeLost", n, inst.Spec.NodeName, c, nodeB)
		}
	}
	f.lost = allowed
	f.lostNever = never
}

// returns starts nodeB's agent again: it retires the generations of what
// moved away with proof, serves nothing of them, and serves its
// unmovable ones again.
func (f *fleet) returns(t *testing.T) {
	b := f.nodes[nodeB]
	b.Start(f.root)
	b.WaitReady(t, 90*time.Second)
	testutil.Eventually(t, "the returned node's stale generations proven gone", 90*time.Second, 500*time.Millisecond, func() (bool, string) {
		for _, n := range f.lost {
			if ok, why := oldGenerationsGone(t, n, nodeB); !ok {
				return false, why
			}
		}
		return true, ""
	})
	for _, n := range f.lost {
		inst := getInstance(t, n)
		if inst.Status.NodeName == nodeB {
			t.Errorf("%s serves on the returned node again", n)
		}
		for _, g := range generations(t, n) {
			if g.Spec.NodeName != nodeB {
				continue
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated); c == nil || c.Reason != v1.ReasonProven {
				t.Errorf("%s generation %d on %s: Terminated %v, want True/Proven", n, g.Spec.Number, nodeB, c)
			}
			li, err := b.Layout().Instance(ns, n)
			if err != nil {
				t.Fatal(err)
			}
			sock, err := li.AppSocket(g.Spec.Number)
			if err != nil {
				t.Fatal(err)
			}
			if body, err := testutil.UnixGet(sock, "/"); err == nil {
				t.Errorf("%s generation %d on the returned node still answers: %q", n, g.Spec.Number, body)
			}
		}
		li, _ := b.Layout().Instance(ns, n)
		if body, err := testutil.UnixGet(li.StableSocket(), "/"); err == nil {
			t.Errorf("%s: the returned node's stable socket still answers: %q", n, body)
		}
	}
	waitAllServing(t, f.lostNever, 90*time.Second)
}
