package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func ref(name string, n int64) node.Ref { return node.GenerationRef("default", name, n) }

// kstatusOf is what kstatus (and so Flux and Argo CD) reads off the object.
func kstatusOf(t *testing.T, obj runtime.Object) status.Status {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: u})
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	return res.Status
}

func TestApplyBecomesReady(t *testing.T) {
	create(t, instance("apply"))
	inst := waitInstance(t, "apply", v1.ConditionReady, "True/Reconciled")
	if inst.Status.ActiveGeneration != 1 || inst.Status.Socket == "" {
		t.Errorf("active=%d socket=%q, want generation 1 and a socket", inst.Status.ActiveGeneration, inst.Status.Socket)
	}
	if inst.Status.ObservedGeneration != inst.Generation {
		t.Errorf("observedGeneration=%d, want %d", inst.Status.ObservedGeneration, inst.Generation)
	}
	for _, c := range inst.Status.Conditions {
		if c.ObservedGeneration != inst.Generation {
			t.Errorf("condition %s observedGeneration=%d, want %d", c.Type, c.ObservedGeneration, inst.Generation)
		}
	}
	if !controllerutil.ContainsFinalizer(inst, v1.Finalizer) {
		t.Error("no finalizer (lease) on a running Instance")
	}
	if got := kstatusOf(t, inst); got != status.CurrentStatus {
		t.Errorf("kstatus = %s, want Current", got)
	}
	// Ready and proven: every condition is normal, so none has a series.
	testutil.Eventually(t, "no condition series", waitLimit, pollEvery, func() (bool, string) {
		got := conditionSeries(t, "apply")
		return len(got) == 0, fmt.Sprint(got)
	})
	g := getGeneration(t, "apply", 1)
	want := map[string]string{v1.ConditionStarted: "True/Running", v1.ConditionReady: "True/ProbeSucceeded", v1.ConditionPrepared: "True/Prepared"}
	got := map[string]string{}
	for typ := range want {
		got[typ] = condition(g.Status.Conditions, typ)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generation 1 conditions (-want,+got):\n%s", diff)
	}
	if g.Labels[v1.LabelInstance] != "apply" || !metav1IsControlledBy(g, inst) {
		t.Errorf("generation 1 not labelled and owned by its Instance: %v %v", g.Labels, g.OwnerReferences)
	}
}

func metav1IsControlledBy(g *v1.Generation, inst *v1.Instance) bool {
	for _, o := range g.OwnerReferences {
		if o.UID == inst.UID && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

func TestOverlapSwap(t *testing.T) {
	create(t, instance("overlap"))
	waitInstance(t, "overlap", v1.ConditionReady, "True/Reconciled")
	updateInstance(t, "overlap", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	inst := waitInstance(t, "overlap", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "generation 1 proven gone", waitLimit, pollEvery, func() (bool, string) {
		g := getGeneration(t, "overlap", 1)
		return terminated(g), conditionsOf(g.Status.Conditions)
	})
	inst = waitInstance(t, "overlap", v1.ConditionReady, "True/Reconciled")
	if inst.Status.ActiveGeneration != 2 {
		t.Fatalf("active = %d, want 2", inst.Status.ActiveGeneration)
	}
	want := []string{
		"start overlap/g1", "promote overlap/g1",
		"raise overlap/parent memory=134217728", // 2 × 64Mi before the successor starts
		"start overlap/g2", "promote overlap/g2", "retire overlap/g1", "restore overlap/parent memory=67108864",
	}
	testutil.Eventually(t, "the overlap's calls", waitLimit, pollEvery, func() (bool, string) {
		got := fake.Calls("overlap")
		return len(got) >= len(want) && cmp.Diff(want, got[:len(want)]) == "", cmp.Diff(want, got)
	})
}

func TestReplaceProvesOldGoneFirst(t *testing.T) {
	create(t, instance("replace", replace))
	waitInstance(t, "replace", v1.ConditionReady, "True/Reconciled")
	updateInstance(t, "replace", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	testutil.Eventually(t, "generation 2 serving", waitLimit, pollEvery, func() (bool, string) {
		i := getInstance(t, "replace")
		return i.Status.ActiveGeneration == 2 && meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady), conditionsOf(i.Status.Conditions)
	})
	want := []string{"start replace/g1", "promote replace/g1", "retire replace/g1", "start replace/g2", "promote replace/g2"}
	if diff := cmp.Diff(want, fake.Calls("replace")[:len(want)]); diff != "" {
		t.Errorf("Replace must prove g1 gone before g2 starts (-want,+got):\n%s", diff)
	}
}

func TestReplaceFencedByUnprovenKill(t *testing.T) {
	create(t, instance("fenced", replace))
	waitInstance(t, "fenced", v1.ConditionReady, "True/Reconciled")
	fake.set(func(f *fakeRuntime) { f.unproven[ref("fenced", 1)] = outcome.CgroupNotEmpty })
	updateInstance(t, "fenced", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	inst := waitInstance(t, "fenced", v1.ConditionKillUnproven, "True/CgroupNotEmpty")
	if got := condition(inst.Status.Conditions, v1.ConditionReady); got != "False/KillUnproven" {
		t.Errorf("Ready = %s, want False/KillUnproven", got)
	}
	// The conditions away from normal have their series, at 1.
	testutil.Eventually(t, "condition series while fenced", waitLimit, pollEvery, func() (bool, string) {
		got := conditionSeries(t, "fenced")
		return slices.Contains(got, "KillUnproven=True") && slices.Contains(got, "Ready=False"), fmt.Sprint(got)
	})
	if getGeneration(t, "fenced", 2) != nil {
		t.Fatal("generation 2 created while generation 1's kill is unproven: two writers possible")
	}
	if g := getGeneration(t, "fenced", 1); terminated(g) {
		t.Fatal("Terminated=True without a proof")
	}
	fake.set(func(f *fakeRuntime) { delete(f.unproven, ref("fenced", 1)) })
	testutil.Eventually(t, "generation 2 after the proof", waitLimit, pollEvery, func() (bool, string) {
		i := getInstance(t, "fenced")
		return i.Status.ActiveGeneration == 2, conditionsOf(i.Status.Conditions)
	})
	// Proven and serving again: back to normal, the series are gone.
	testutil.Eventually(t, "condition series gone once normal", waitLimit, pollEvery, func() (bool, string) {
		got := conditionSeries(t, "fenced")
		return len(got) == 0, fmt.Sprint(got)
	})
}

func TestUncertainStart(t *testing.T) {
	cases := map[string]struct {
		kind   outcome.StartKind
		reason string
	}{
		"answer lost":      {outcome.MayHaveRun, v1.ReasonMayHaveRun},
		"job still queued": {outcome.QueuedJobMayRun, v1.ReasonQueuedJobMayRun},
	}
	i := 0
	for label, tc := range cases {
		i++
		name := map[int]string{1: "uncertain-a", 2: "uncertain-b"}[i]
		t.Run(label, func(t *testing.T) {
			fake.set(func(f *fakeRuntime) { f.start[ref(name, 1)] = tc.kind })
			create(t, instance(name))
			inst := waitInstance(t, name, v1.ConditionStartUncertain, "True/"+tc.reason)
			if got := condition(inst.Status.Conditions, v1.ConditionReady); got != "False/StartUncertain" {
				t.Errorf("Ready = %s, want False/StartUncertain", got)
			}
			if got := kstatusOf(t, inst); got != status.InProgressStatus {
				t.Errorf("kstatus = %s, want InProgress", got)
			}
			g := getGeneration(t, name, 1)
			if got := condition(g.Status.Conditions, v1.ConditionStarted); got != "Unknown/"+tc.reason {
				t.Errorf("Started = %s, want Unknown/%s", got, tc.reason)
			}
			// Deleting needs the proof: the lease stays until it comes.
			fake.set(func(f *fakeRuntime) { f.unproven[ref(name, 1)] = outcome.ProofTimedOut })
			if err := k8s.Delete(context.Background(), inst); err != nil {
				t.Fatal(err)
			}
			inst = waitInstance(t, name, v1.ConditionKillUnproven, "True/ProofTimedOut")
			if !controllerutil.ContainsFinalizer(inst, v1.Finalizer) {
				t.Fatal("lease released without a proof")
			}
			if g := getGeneration(t, name, 1); g == nil || terminated(g) {
				t.Fatal("generation gone or Terminated=True without a proof")
			}
			fake.set(func(f *fakeRuntime) { delete(f.unproven, ref(name, 1)) })
			testutil.Eventually(t, "instance deleted after the proof", waitLimit, pollEvery, func() (bool, string) {
				err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &v1.Instance{})
				return apierrors.IsNotFound(err), "still present"
			})
		})
	}
}

func TestCrashAtStartAbortsSwap(t *testing.T) {
	create(t, instance("crash"))
	waitInstance(t, "crash", v1.ConditionReady, "True/Reconciled")
	fake.set(func(f *fakeRuntime) { f.start[ref("crash", 2)] = outcome.ExitedBeforeObserved })
	updateInstance(t, "crash", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--broken"} })
	inst := waitInstance(t, "crash", v1.ConditionStalled, "True/SwapAborted")
	if inst.Status.ActiveGeneration != 1 {
		t.Errorf("active = %d, want 1 (the old generation keeps serving)", inst.Status.ActiveGeneration)
	}
	if got := kstatusOf(t, inst); got != status.FailedStatus {
		t.Errorf("kstatus = %s, want Failed", got)
	}
	g2 := getGeneration(t, "crash", 2)
	if got := condition(g2.Status.Conditions, v1.ConditionStarted); got != "False/ExitedBeforeObserved" {
		t.Errorf("g2 Started = %s", got)
	}
	if g2.Status.Exit == nil || g2.Status.Exit.Code == nil || *g2.Status.Exit.Code != 3 {
		t.Errorf("g2 exit = %+v, want code 3", g2.Status.Exit)
	}
	testutil.Eventually(t, "g2 retired", waitLimit, pollEvery, func() (bool, string) { g := getGeneration(t, "crash", 2); return g.Spec.Retired, "" })
	if g1 := getGeneration(t, "crash", 1); g1.Spec.Retired {
		t.Error("old generation retired by a failed swap")
	}
	testutil.Eventually(t, "the parent limit restored after the aborted overlap", waitLimit, pollEvery, func() (bool, string) {
		calls := fake.Calls("crash")
		return len(calls) > 0 && calls[len(calls)-1] == "restore crash/parent memory=67108864", strings.Join(calls, ", ")
	})
	// A fixed template tries again.
	updateInstance(t, "crash", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--fixed"} })
	testutil.Eventually(t, "generation 3 serving", waitLimit, pollEvery, func() (bool, string) {
		i := getInstance(t, "crash")
		return i.Status.ActiveGeneration == 3 && meta.FindStatusCondition(i.Status.Conditions, v1.ConditionStalled) == nil, conditionsOf(i.Status.Conditions)
	})
}

func TestSuspendResume(t *testing.T) {
	create(t, instance("sleepy"))
	waitInstance(t, "sleepy", v1.ConditionReady, "True/Reconciled")
	updateInstance(t, "sleepy", func(i *v1.Instance) { i.Spec.Suspend = true })
	inst := waitInstance(t, "sleepy", v1.ConditionReady, "True/Suspended")
	testutil.Eventually(t, "every generation proven gone", waitLimit, pollEvery, func() (bool, string) {
		g := getGeneration(t, "sleepy", 1)
		return terminated(g), conditionsOf(g.Status.Conditions)
	})
	testutil.Eventually(t, "suspended and settled: kstatus Current", waitLimit, pollEvery, func() (bool, string) {
		i := getInstance(t, "sleepy")
		return kstatusOf(t, i) == status.CurrentStatus, conditionsOf(i.Status.Conditions)
	})
	updateInstance(t, "sleepy", func(i *v1.Instance) { i.Spec.Suspend = false })
	inst = waitInstance(t, "sleepy", v1.ConditionReady, "True/Reconciled")
	if inst.Status.ActiveGeneration != 2 {
		t.Errorf("resumed active = %d, want a new generation 2", inst.Status.ActiveGeneration)
	}
}

func TestOtherNodesInstanceUntouched(t *testing.T) {
	other := instance("elsewhere")
	other.Spec.NodeName = "node-other"
	create(t, other)
	// An Instance on this node, created after, served: the agent has
	// seen every event before it.
	create(t, instance("here-after"))
	waitInstance(t, "here-after", v1.ConditionReady, "True/Reconciled")
	// The cluster side mints the key for any placed Instance and says it
	// awaits the agent; that one condition is all the status may hold.
	got := waitInstance(t, "elsewhere", v1.ConditionReconciling, "True/"+v1.ReasonProgressing)
	want := []metav1.Condition{v1.AwaitingAgent(got.Generation, "instance key minted")}
	if diff := cmp.Diff(want, got.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("another node's Instance has conditions (-want,+got):\n%s", diff)
	}
	if len(got.Finalizers) != 0 || got.Status.NodeName != "" || len(fake.Calls("elsewhere")) != 0 {
		t.Errorf("another node's Instance was touched: %v %q %v", got.Finalizers, got.Status.NodeName, fake.Calls("elsewhere"))
	}
}

func TestDeleteReleasesLease(t *testing.T) {
	create(t, instance("gone", withSidecars("worker")))
	inst := waitInstance(t, "gone", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "sidecar started", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start gone/sidecar.worker") == 1, "" })
	if err := k8s.Delete(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "instance deleted", waitLimit, pollEvery, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(inst), &v1.Instance{})
		return apierrors.IsNotFound(err), "present"
	})
	testutil.Eventually(t, "series of the deleted Instance removed", waitLimit, pollEvery, func() (bool, string) {
		got := conditionSeries(t, "gone")
		return len(got) == 0, fmt.Sprint(got)
	})
	want := []string{"start gone/g1", "promote gone/g1", "start gone/sidecar.worker", "retire gone/g1", "retire gone/seed", "retire gone/sidecar.worker", "remove gone/all"}
	if diff := cmp.Diff(want, fake.Calls("gone")); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}
	if getGeneration(t, "gone", 1) != nil {
		t.Error("generation left behind")
	}
}

// TestNoDoubleStart: however often the reconcilers run, each generation
// is handed to the runtime once.
func TestNoDoubleStart(t *testing.T) {
	for _, name := range []string{"apply", "overlap", "replace", "crash", "sleepy"} {
		for n := 1; n <= 3; n++ {
			if c := fake.Count(fmt.Sprintf("start %s/g%d", name, n)); c > 1 {
				t.Errorf("%s generation %d started %d times", name, n, c)
			}
		}
	}
}
