package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

const (
	bootBefore = "11111111-2222-4333-8444-555555555555"
	bootAfter  = "66666666-7777-4888-9999-aaaaaaaaaaaa"
)

// bootNode is a node whose agent can be stopped and started again, with
// a boot ID file the test rewrites to "reboot" it.
type bootNode struct {
	name   string
	rt     *fakeRuntime
	rec    *boot.Record
	cancel context.CancelFunc
	done   <-chan struct{}
}

func newBootNode(t *testing.T, name string) *bootNode {
	dir := t.TempDir()
	n := &bootNode{name: name, rt: newFakeRuntime(),
		rec: &boot.Record{Path: filepath.Join(dir, "state", "boot_id"), PendingPath: filepath.Join(dir, "state", "boot_pending.json"), Source: filepath.Join(dir, "boot_id")}}
	n.setBoot(t, bootBefore)
	n.start(t)
	t.Cleanup(n.stop)
	return n
}

func (n *bootNode) setBoot(t *testing.T, id string) {
	t.Helper()
	if err := os.WriteFile(n.rec.Source, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *bootNode) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := startAgentBoot(ctx, n.name, n.rt, n.rec)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	n.cancel, n.done = cancel, done
}

func (n *bootNode) stop() {
	n.cancel()
	<-n.done
}

func (n *bootNode) instance(t *testing.T, name string) *v1.Instance {
	inst := instance(name, func(i *v1.Instance) { i.Spec.NodeName = n.name })
	create(t, inst)
	t.Cleanup(func() { kube.DeleteAndWait(t, name, waitLimit) })
	return inst
}

// TestRebootProvesOldBootGone: an agent that finds the node's boot ID
// changed since it last ran writes every generation of the old boot
// Terminated=True/NodeRebooted (a serving one, one whose kill was never
// proven, one whose start may have run), and each Instance is served
// again by a new generation, numbered on.
func TestRebootProvesOldBootGone(t *testing.T) {
	n := newBootNode(t, "node-rebooted")
	serving, unproven, uncertain := n.instance(t, "rb-serving"), n.instance(t, "rb-unproven"), n.instance(t, "rb-uncertain")
	n.rt.set(func(f *fakeRuntime) {
		f.unproven[node.GenerationRef("default", unproven.Name, 1)] = outcome.KillReason(v1.ReasonCgroupNotEmpty)
		f.start[node.GenerationRef("default", uncertain.Name, 1)] = outcome.MayHaveRun
	})
	waitInstance(t, serving.Name, v1.ConditionReady, "True/Reconciled")
	waitInstance(t, uncertain.Name, v1.ConditionStartUncertain, "True/MayHaveRun")
	waitInstance(t, unproven.Name, v1.ConditionReady, "True/Reconciled")
	updateInstance(t, unproven.Name, func(i *v1.Instance) { i.Spec.Template.Args = []string{"v2"} })
	waitInstance(t, unproven.Name, v1.ConditionKillUnproven, "True/CgroupNotEmpty")

	n.stop()
	// The reboot: nothing of the old boot runs, and a kill now empties.
	n.rt.set(func(f *fakeRuntime) {
		f.running, f.unproven, f.start = map[node.Ref]bool{}, map[node.Ref]outcome.KillReason{}, map[node.Ref]outcome.StartKind{}
	})
	n.setBoot(t, bootAfter)
	n.start(t)

	for name, next := range map[string]int64{serving.Name: 2, unproven.Name: 3, uncertain.Name: 2} {
		var inst *v1.Instance
		testutil.Eventually(t, name+" served by a generation of the new boot", waitLimit, pollEvery, func() (bool, string) {
			inst = getInstance(t, name)
			return inst.Status.ActiveGeneration >= next && condition(inst.Status.Conditions, v1.ConditionReady) == "True/Reconciled",
				fmt.Sprintf("generation %d: %s", inst.Status.ActiveGeneration, conditionsOf(inst.Status.Conditions))
		})
		for _, typ := range []string{v1.ConditionKillUnproven, v1.ConditionStartUncertain} {
			if c := meta.FindStatusCondition(inst.Status.Conditions, typ); c == nil || c.Status != "False" {
				t.Errorf("%s %s = %s after the reboot", name, typ, condition(inst.Status.Conditions, typ))
			}
		}
		for g := int64(1); g < next; g++ {
			gen := getGeneration(t, name, g)
			if gen == nil {
				t.Fatalf("%s generation %d is gone", name, g)
			}
			if got := condition(gen.Status.Conditions, v1.ConditionTerminated); got != "True/NodeRebooted" {
				t.Errorf("%s generation %d Terminated = %s, want True/NodeRebooted (%s)", name, g, got, conditionsOf(gen.Status.Conditions))
			}
		}
	}
	if got := condition(getGeneration(t, uncertain.Name, 1).Status.Conditions, v1.ConditionStarted); got != "False/NodeRebooted" {
		t.Errorf("the uncertain start reads Started=%s after the reboot, want False/NodeRebooted", got)
	}
	if b, _ := os.ReadFile(n.rec.Path); string(b) != bootAfter+"\n" {
		t.Errorf("boot record %q, want the new boot's", b)
	}
}

// TestSameBootProvesNothing: an agent restarted in the same boot never
// takes its generations for gone: it re-adopts them.
func TestSameBootProvesNothing(t *testing.T) {
	n := newBootNode(t, "node-same-boot")
	inst := n.instance(t, "sb-serving")
	waitInstance(t, inst.Name, v1.ConditionReady, "True/Reconciled")
	promote := "promote " + inst.Name + "/g1"
	before := n.rt.Count(promote)

	n.stop()
	n.start(t)
	// Adoption points the fence at the serving generation again, last.
	testutil.Eventually(t, "adoption re-fenced generation 1", waitLimit, pollEvery, func() (bool, string) {
		return n.rt.Count(promote) > before, "no promote after the restart"
	})
	time.Sleep(time.Second) // a reconcile after adoption would have acted by now
	got := getInstance(t, inst.Name)
	if got.Status.ActiveGeneration != 1 || getGeneration(t, inst.Name, 2) != nil {
		t.Errorf("served by generation %d after a restart in the same boot, want 1 and no other", got.Status.ActiveGeneration)
	}
	gen := getGeneration(t, inst.Name, 1)
	if c := condition(gen.Status.Conditions, v1.ConditionTerminated); c != "absent" {
		t.Errorf("generation 1 Terminated = %s after a restart in the same boot", c)
	}
	if c := condition(gen.Status.Conditions, v1.ConditionReady); c != "True/ProbeSucceeded" {
		t.Errorf("generation 1 Ready = %s after a restart in the same boot", c)
	}
}
