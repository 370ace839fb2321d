package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
)

var errStatusHeld = errors.New("test: status writes held")

// statusHeld gives the agent a client whose status writes wait until
// release closes (or fail at once when release is nil): an API server
// that takes the agent's reads and creates but not its reports.
func statusHeld(release <-chan struct{}) func(*ctrl.Options) {
	hold := func(ctx context.Context) error {
		if release == nil {
			return errStatusHeld
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					if err := hold(ctx); err != nil {
						return err
					}
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if err := hold(ctx); err != nil {
						return err
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			}), nil
		}
	}
}

// reboot stops n's agent, takes everything of the old boot off its node
// and changes the boot ID.
func (n *bootNode) reboot(t *testing.T) {
	t.Helper()
	n.stop()
	n.rt.set(func(f *fakeRuntime) { f.running = map[node.Ref]bool{} })
	n.setBoot(t, bootAfter)
}

func (n *bootNode) startWith(t *testing.T, mods ...func(*ctrl.Options)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := startAgentBoot(ctx, n.name, n.rt, n.rec, mods...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	n.cancel, n.done = cancel, done
}

// TestRebootServesBeforeReporting: after a reboot the Instance that served
// is served again (its new generation started and its stable socket
// flipped) while the API takes none of the agent's status writes; its
// new Generation, with its finalizer, exists before the start. Once the
// writes go through, everything is reported as without the wait.
func TestRebootServesBeforeReporting(t *testing.T) {
	n := newBootNode(t, "node-serve-first")
	inst := n.instance(t, "sf-serving")
	waitInstance(t, inst.Name, v1.ConditionReady, "True/Reconciled")
	n.reboot(t)
	release := make(chan struct{})
	n.startWith(t, statusHeld(release))

	promote := "promote " + inst.Name + "/g2"
	testutil.Eventually(t, "generation 2 serves with every status write held", waitLimit, pollEvery, func() (bool, string) {
		return n.rt.Count(promote) > 0, fmt.Sprint(n.rt.Calls(inst.Name))
	})
	if g := getGeneration(t, inst.Name, 2); g == nil || !controllerutil.ContainsFinalizer(g, v1.Finalizer) {
		t.Fatalf("generation 2 serves without its record and lease: %+v", g)
	}
	if got := getInstance(t, inst.Name).Status.ActiveGeneration; got != 1 {
		t.Fatalf("the Instance's status moved to generation %d while its writes were held", got)
	}
	if c := condition(getGeneration(t, inst.Name, 1).Status.Conditions, v1.ConditionTerminated); c != "absent" {
		t.Fatalf("generation 1 Terminated = %s while the writes were held", c)
	}

	close(release)
	testutil.Eventually(t, "reported: generation 2 active and Ready", waitLimit, pollEvery, func() (bool, string) {
		got := getInstance(t, inst.Name)
		return got.Status.ActiveGeneration == 2 && condition(got.Status.Conditions, v1.ConditionReady) == "True/Reconciled",
			fmt.Sprintf("generation %d: %s", got.Status.ActiveGeneration, conditionsOf(got.Status.Conditions))
	})
	testutil.Eventually(t, "generation 1 written gone with the boot", waitLimit, pollEvery, func() (bool, string) {
		c := condition(getGeneration(t, inst.Name, 1).Status.Conditions, v1.ConditionTerminated)
		return c == "True/NodeRebooted", c
	})
	// The start made before any report still reports what it made: a
	// check of the node finds the unit by this name.
	if g := getGeneration(t, inst.Name, 2); g.Status.Unit == "" || g.Status.StartedAt == nil {
		t.Errorf("generation 2 reported without its unit or start: %+v", g.Status)
	}
	if _, err := os.Stat(n.rec.PendingPath); !os.IsNotExist(err) {
		t.Errorf("the reboot's record is kept once written: %v", err)
	}
}

// TestRebootProofOutlivesTheAgent: an agent that served again after a
// reboot and died before any status write leaves the node's record of
// which generations the old boot took; the next agent, in the same boot,
// writes those gone and only those: the generation the first one started
// serves on, never taken for one of the old boot.
func TestRebootProofOutlivesTheAgent(t *testing.T) {
	n := newBootNode(t, "node-proof-kept")
	inst := n.instance(t, "pk-serving")
	waitInstance(t, inst.Name, v1.ConditionReady, "True/Reconciled")
	n.reboot(t)
	n.startWith(t, statusHeld(nil))
	testutil.Eventually(t, "generation 2 serves", waitLimit, pollEvery, func() (bool, string) {
		return n.rt.Count("promote "+inst.Name+"/g2") > 0, fmt.Sprint(n.rt.Calls(inst.Name))
	})
	n.stop()
	if _, err := os.Stat(n.rec.PendingPath); err != nil {
		t.Fatalf("no record of the old boot's generations left for the next agent: %v", err)
	}

	n.start(t) // the same boot: generation 2 still runs
	testutil.Eventually(t, "generation 1 written gone with the boot", waitLimit, pollEvery, func() (bool, string) {
		c := condition(getGeneration(t, inst.Name, 1).Status.Conditions, v1.ConditionTerminated)
		return c == "True/NodeRebooted", c
	})
	testutil.Eventually(t, "generation 2 active and Ready", waitLimit, pollEvery, func() (bool, string) {
		got := getInstance(t, inst.Name)
		return got.Status.ActiveGeneration == 2 && condition(got.Status.Conditions, v1.ConditionReady) == "True/Reconciled",
			fmt.Sprintf("generation %d: %s", got.Status.ActiveGeneration, conditionsOf(got.Status.Conditions))
	})
	if c := condition(getGeneration(t, inst.Name, 2).Status.Conditions, v1.ConditionTerminated); c != "absent" {
		t.Errorf("generation 2, started in this boot, reads Terminated=%s", c)
	}
	if g := getGeneration(t, inst.Name, 3); g != nil {
		t.Errorf("generation 3 made: generation 2 was taken for one of the old boot")
	}
	testutil.Eventually(t, "the record removed once written", waitLimit, pollEvery, func() (bool, string) {
		_, err := os.Stat(n.rec.PendingPath)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// TestRebootPromotionNotUndone: while adoption waits for the generation
// it started after a reboot to answer, the Instance reconciler leaves the
// Instance alone (a template changed meanwhile is acted on once that
// wait is over), so that promotion never lands after one of its own.
func TestRebootPromotionNotUndone(t *testing.T) {
	n := newBootNode(t, "node-first-held")
	inst := instance("fh-serving", func(i *v1.Instance) {
		i.Spec.NodeName, i.Spec.Template.Readiness.TimeoutSeconds = n.name, 4
	})
	create(t, inst)
	t.Cleanup(func() { kube.DeleteAndWait(t, inst.Name, waitLimit) })
	waitInstance(t, inst.Name, v1.ConditionReady, "True/Reconciled")
	n.reboot(t)
	g2 := node.GenerationRef("default", inst.Name, 2)
	n.rt.set(func(f *fakeRuntime) { f.probe[g2] = errors.New("test: not answering yet") })
	n.startWith(t)
	testutil.Eventually(t, "generation 2 started by adoption", waitLimit, pollEvery, func() (bool, string) {
		return n.rt.Count("start "+inst.Name+"/g2") > 0, fmt.Sprint(n.rt.Calls(inst.Name))
	})
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Args = []string{"v3"} })
	time.Sleep(1500 * time.Millisecond) // the Instance reconciler would have made generation 3 by now
	if g := getGeneration(t, inst.Name, 3); g != nil {
		t.Fatalf("generation 3 made while adoption still waited for generation 2 to answer")
	}
	testutil.Eventually(t, "generation 3 made once adoption gave generation 2 up", waitLimit, pollEvery, func() (bool, string) {
		return getGeneration(t, inst.Name, 3) != nil, fmt.Sprint(n.rt.Calls(inst.Name))
	})
	if c := n.rt.Count("promote " + inst.Name + "/g2"); c != 0 {
		t.Errorf("generation 2, never answering, was promoted %d times", c)
	}
}
