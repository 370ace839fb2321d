package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	ocgroups "github.com/opencontainers/cgroups"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestOverlapSwapUnderLoad: the Overlap sample becomes Ready, answers
// through its stable socket, and a template change swaps generations
// while ≥ 10,000 requests go through nginx, none of them failing.
func TestOverlapSwapUnderLoad(t *testing.T) {
	a := startAgent(t, "e2e-a")
	inst := sample(t, "hosting_v1alpha1_instance_overlap.yaml", a.Node)
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	kubectl(t, "wait", "--for=condition=Ready", "inst/"+inst.Name, "--timeout=90s")
	inst = waitServing(t, inst.Name, 1)
	body, err := unixGet(inst.Status.Socket, "/")
	if err != nil || body != "hello from shop.example.com generation 1\n" {
		t.Fatalf("GET through %s = %q, %v", inst.Status.Socket, body, err)
	}

	addr := startNginx(t, inst.Status.Socket)
	l := testutil.StartLoad(addr, 8, 10000, 3*time.Minute)
	defer l.Stop()
	time.Sleep(time.Second) // load on the old generation first
	from := l.Tally()
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Env[0].Value = "shop-v2.example.com" })
	waitServing(t, inst.Name, 2)
	testutil.Eventually(t, "generation 1 proven gone", 60*time.Second, pollEvery, func() (bool, string) {
		g := getGeneration(t, inst.Name, 1)
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated), conditions(g.Status.Conditions)
	})
	during := l.Tally().Since(from)
	l.Stop()
	total, bodies := l.Total(), l.Bodies()
	fmt.Printf("e2e overlap swap: %d requests through nginx (%d during the swap), %d failed, by answer: %v\n",
		total, during.Total(), l.Failed.Load(), bodies)
	if l.Failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the swap; first: %v", l.Failed.Load(), total, l.FirstErr())
	}
	if total < 10000 || during.OK == 0 {
		t.Fatalf("only %d requests sent, %d answered during the swap", total, during.OK)
	}
	if bodies["hello from shop.example.com generation 1\n"] == 0 || bodies["hello from shop-v2.example.com generation 2\n"] == 0 {
		t.Fatalf("want answers from both generations, got %v", bodies)
	}
}

// TestReplaceSuspendDelete: Replace proves the old generation gone before
// the new one starts; suspend stops everything and keeps the dirs; delete
// leaves no process, cgroup or directory behind.
func TestReplaceSuspendDelete(t *testing.T) {
	a := startAgent(t, "e2e-r")
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	waitServing(t, inst.Name, 1)
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	inst = waitServing(t, inst.Name, 2)
	g1, g2 := getGeneration(t, inst.Name, 1), getGeneration(t, inst.Name, 2)
	proof := meta.FindStatusCondition(g1.Status.Conditions, v1.ConditionTerminated)
	if proof == nil || proof.Status != "True" || g2.Status.StartedAt == nil || g2.Status.StartedAt.Before(&proof.LastTransitionTime) {
		t.Fatalf("Replace: generation 2 started at %v, generation 1 proven gone at %v", g2.Status.StartedAt, proof)
	}
	if body, err := unixGet(inst.Status.Socket, "/"); err != nil || body != "ledger ok\n" {
		t.Fatalf("GET = %q, %v", body, err)
	}

	lay := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}
	li, err := lay.Instance("default", inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The same order to the microsecond: generation 1's main process had
	// ended before generation 2's start was even handed off.
	exit1, err := testutil.ExitRecord(os.ReadFile, li, 1)
	if err != nil {
		t.Fatal(err)
	}
	handedOff, err := testutil.HandedOffAt(os.ReadFile, li, 2)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckReplaceOrder(t, inst.Name, exit1.At, handedOff)
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Suspend = true })
	testutil.Eventually(t, "suspended", 60*time.Second, pollEvery, func() (bool, string) {
		i := getInstance(t, inst.Name)
		c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReady)
		return c != nil && c.Reason == v1.ReasonSuspended && c.Status == "True", conditions(i.Status.Conditions)
	})
	if n := processesUnder(t, li.Cgroup()); n != 0 {
		t.Fatalf("suspended, yet %d processes run in %s", n, li.Cgroup())
	}
	if _, err := os.Stat(li.DataDir()); err != nil {
		t.Fatalf("suspend removed the data dir: %v", err)
	}
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Suspend = false })
	waitServing(t, inst.Name, 3)

	deleteAndWait(t, inst.Name)
	for _, dir := range []string{li.DataDir(), li.RunDir(), "/sys/fs/cgroup/memory/" + li.Cgroup(), "/sys/fs/cgroup/pids/" + li.Cgroup()} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("after delete %s still exists (%v)", dir, err)
		}
	}
}

// TestTwoNodes: two agents against one API server each run only their own
// node's Instances.
func TestTwoNodes(t *testing.T) {
	b, c := startAgent(t, "e2e-b"), startAgent(t, "e2e-c")
	for _, n := range []*agent{b, c} {
		inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", n.Node)
		inst.Name = "ledger-" + strings.TrimPrefix(n.Node, "e2e-")
		inst.Spec.Host = inst.Name + ".example.com" // a host is the cluster's: one Instance serves it
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	}
	waitServing(t, "ledger-b", 1)
	waitServing(t, "ledger-c", 1)
	for _, tc := range []struct {
		a         *agent
		mine, not string
	}{{b, "ledger-b", "ledger-c"}, {c, "ledger-c", "ledger-b"}} {
		if processesUnder(t, layout.InstanceCgroup(tc.a.CgroupRoot, "default", tc.mine)) == 0 {
			t.Errorf("node %s runs nothing of its own %s", tc.a.Node, tc.mine)
		}
		if _, err := os.Stat("/sys/fs/cgroup/pids/" + layout.InstanceCgroup(tc.a.CgroupRoot, "default", tc.not)); !os.IsNotExist(err) {
			t.Errorf("node %s holds a cgroup of %s, another node's Instance", tc.a.Node, tc.not)
		}
	}
}

// processesUnder counts the processes in a cgroup subtree.
func processesUnder(t *testing.T, cgroup string) int {
	t.Helper()
	pids, err := ocgroups.GetAllPids("/sys/fs/cgroup/pids/" + cgroup)
	if err != nil && !os.IsNotExist(err) {
		t.Logf("pids of %s: %v", cgroup, err)
	}
	return len(pids)
}
