package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestQuietSwap: a swap's start goes unwritten only while the unwritten
// status already reads as progressing (the edit not yet observed), the
// old generation serves, settled, and the new one says nothing yet, for
// swapQuietMax at most; anything uncertain or unproven is written at once.
func TestQuietSwap(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 10, 0, time.UTC)
	settled := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled}}
	swapping := append([]metav1.Condition{{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonSwapping}}, settled...)
	cases := map[string]struct {
		observed   int64
		conditions []metav1.Condition
		active     gb
		others     []gb
		targetAge  time.Duration
		target     gb
		want       time.Duration
	}{
		"an edit not yet observed, the old one serving": {observed: 1, conditions: settled, active: generation(1, "a").ready(), targetAge: time.Minute, want: swapQuietMax - time.Minute},
		"the new one started, not ready":                {observed: 1, conditions: settled, active: generation(1, "a").ready(), target: generation(2, "b").running()},
		"the new one failed":                            {observed: 1, conditions: settled, active: generation(1, "a").ready(), target: generation(2, "b").refused()},
		"the quiet is over":                             {observed: 1, conditions: settled, active: generation(1, "a").ready(), targetAge: swapQuietMax},
		"the edit is observed already":                  {observed: 2, conditions: settled, active: generation(1, "a").ready()},
		"a swap under way before the edit":              {observed: 1, conditions: swapping, active: generation(1, "a").ready()},
		"the old one is not ready":                      {observed: 1, conditions: settled, active: generation(1, "a").running()},
		"an uncertain start":                            {observed: 1, conditions: settled, active: generation(1, "a").ready(), others: []gb{generation(0, "z").cond(v1.ConditionStarted, metav1.ConditionUnknown)}},
		"an unproven kill":                              {observed: 1, conditions: settled, active: generation(1, "a").ready(), others: []gb{generation(0, "z").cond(v1.ConditionTerminated, metav1.ConditionFalse)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("quiet")
			inst.Generation = 2
			inst.Status.ObservedGeneration, inst.Status.ActiveGeneration, inst.Status.Conditions = tc.observed, 1, tc.conditions
			target := generation(2, "b").g
			if tc.target.g != nil {
				target = tc.target.g
			}
			target.CreationTimestamp = metav1.NewTime(now.Add(-tc.targetAge))
			gens := []*v1.Generation{}
			for _, o := range tc.others {
				gens = append(gens, o.g)
			}
			gens = append(gens, tc.active.g, target)
			s := &instanceScope{r: &InstanceReconciler{Clock: clocktesting.NewFakePassiveClock(now)}, inst: inst, gens: gens, patchBase: inst.DeepCopy()}
			if got := s.quietSwap(target); got != tc.want {
				t.Errorf("quietSwap = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSwapWritesAtPromotion: a template edit's reconciles write nothing
// to the Instance while the new Generation says nothing; the one that
// promotes it is the swap's one status write (Ready, nothing under way),
// and the old generation is retired only by the reconcile after it: an
// agent restarted in between re-fences to the activeGeneration written.
// The old one's proof adds nothing to the Instance.
func TestSwapWritesAtPromotion(t *testing.T) {
	inst := instance("swap")
	served := inst.Spec.Template.DeepCopy()
	inst.UID, inst.Generation, inst.Finalizers = "u1", 2, []string{v1.Finalizer}
	inst.Spec.Template.Args = []string{"v2"} // the edit
	inst.Status = v1.InstanceStatus{ObservedGeneration: 1, ActiveGeneration: 1, KeyFingerprint: "fp", NodeName: testNode,
		Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled, ObservedGeneration: 1}}}
	g1 := generation(1, templateHash(served)).ready().g
	g1.Name, g1.Namespace, g1.Labels = generationName("swap", 1), inst.Namespace, map[string]string{v1.LabelInstance: "swap"}
	g1.Spec.Instance, g1.Spec.NodeName, g1.Spec.Template = "swap", testNode, *served
	now := time.Now()
	var writes []string // in order: each Instance status write, each retirement
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}, &v1.Generation{}).
		WithIndex(&v1.Generation{}, indexGenerationInstance, generationInstance).
		WithObjects(inst, g1).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetCreationTimestamp(metav1.NewTime(now)) // as the API server sets it
			return cl.Create(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if i, ok := obj.(*v1.Instance); ok {
				writes = append(writes, fmt.Sprintf("Instance status: active %d, %s", i.Status.ActiveGeneration, conditionsOf(i.Status.Conditions)))
			}
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if g, ok := obj.(*v1.Generation); ok && g.Spec.Retired {
				writes = append(writes, g.Name+" retired")
			}
			return cl.Patch(ctx, obj, p, opts...)
		}}).Build()
	r := &InstanceReconciler{Client: c, Reader: c, Runtime: newFakeRuntime(), NodeName: testNode, Gate: hostgate.Always{},
		Clock: clocktesting.NewFakePassiveClock(now.Add(time.Second))}
	reconcile := func(step string, want ...string) {
		t.Helper()
		writes = nil
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(want, writes); diff != "" {
			t.Errorf("%s: writes (-want,+got):\n%s", step, diff)
		}
	}

	reconcile("the edit: generation 2 made")
	g2 := &v1.Generation{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: inst.Namespace, Name: generationName("swap", 2)}, g2); err != nil {
		t.Fatalf("generation 2: %v", err)
	}
	reconcile("generation 2 says nothing yet")
	g2.Status.Conditions = generation(2, "").ready().g.Status.Conditions
	if err := c.Status().Update(context.Background(), g2); err != nil {
		t.Fatal(err)
	}
	reconcile("generation 2 ready", "Instance status: active 2, Ready=True/Reconciled StartUncertain=False/Certain KillUnproven=False/Proven")
	reconcile("promoted: generation 1 retired", generationName("swap", 1)+" retired")
	g1 = &v1.Generation{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: inst.Namespace, Name: generationName("swap", 1)}, g1); err != nil {
		t.Fatal(err)
	}
	g1.Status.Conditions = generation(1, "").retired(RetiredSuperseded).gone().g.Status.Conditions
	if err := c.Status().Update(context.Background(), g1); err != nil {
		t.Fatal(err)
	}
	reconcile("generation 1 proven gone: nothing more to say")
}

// TestQuietCreate: a new Instance whose first status (the key minter's)
// says Reconciling goes unwritten while generation 1 says nothing; any
// other first status, or anything generation 1 says, is written at once.
func TestQuietCreate(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 10, 0, time.UTC)
	minted := []metav1.Condition{{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonProgressing}}
	cases := map[string]struct {
		conditions []metav1.Condition
		target     gb
		others     []gb
		want       time.Duration
	}{
		"the minter says Reconciling, generation 1 says nothing": {conditions: minted, want: swapQuietMax - time.Second},
		"generation 1 started, not ready":                        {conditions: minted, target: generation(1, "a").running()},
		"generation 1 failed":                                    {conditions: minted, target: generation(1, "a").refused()},
		"an uncertain start": {conditions: minted,
			others: []gb{generation(0, "z").cond(v1.ConditionStarted, metav1.ConditionUnknown)}},
		"only placement's Scheduled": {conditions: []metav1.Condition{{Type: v1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: v1.ReasonBound}}},
		"a failed reconcile said so": {conditions: []metav1.Condition{{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonReconcileFailed}}},
		"no status at all":           {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("new")
			inst.Generation, inst.Status.Conditions = 1, tc.conditions
			target := generation(1, "a")
			if tc.target.g != nil {
				target = tc.target
			}
			if got := quietOf(now, inst, target.g, time.Second, gensOf(tc.others)); got != tc.want {
				t.Errorf("quietSwap = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestQuietRelease: a deleted Instance that had settled goes unwritten
// while its Generations stop as they should, for releaseQuietMax.
func TestQuietRelease(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC)
	settled := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled}}
	swapping := append([]metav1.Condition{{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonSwapping}}, settled...)
	cases := map[string]struct {
		conditions []metav1.Condition
		age        time.Duration
		gens       []gb
		want       time.Duration
	}{
		"settled, its generation draining": {conditions: settled, age: 10 * time.Second, gens: []gb{generation(1, "a").ready()},
			want: releaseQuietMax - 10*time.Second},
		"the quiet is over":  {conditions: settled, age: releaseQuietMax, gens: []gb{generation(1, "a").ready()}},
		"a swap under way":   {conditions: swapping, gens: []gb{generation(1, "a").ready()}},
		"never settled":      {gens: []gb{generation(1, "a").running()}},
		"an unproven kill":   {conditions: settled, gens: []gb{generation(1, "a").cond(v1.ConditionTerminated, metav1.ConditionFalse)}},
		"an uncertain start": {conditions: settled, gens: []gb{generation(1, "a").cond(v1.ConditionStarted, metav1.ConditionUnknown)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("gone")
			inst.Status.Conditions = tc.conditions
			inst.DeletionTimestamp = &metav1.Time{Time: now.Add(-tc.age)}
			s := &instanceScope{r: &InstanceReconciler{Clock: clocktesting.NewFakePassiveClock(now)}, inst: inst, gens: gensOf(tc.gens), patchBase: inst.DeepCopy()}
			if got := s.quietRelease(); got != tc.want {
				t.Errorf("quietRelease = %s, want %s", got, tc.want)
			}
		})
	}
}

// quietOf is quietSwap's answer at now for inst swapping to target, made
// age ago, beside others.
func quietOf(now time.Time, inst *v1.Instance, target *v1.Generation, age time.Duration, others []*v1.Generation) time.Duration {
	target.CreationTimestamp = metav1.NewTime(now.Add(-age))
	s := &instanceScope{r: &InstanceReconciler{Clock: clocktesting.NewFakePassiveClock(now)}, inst: inst,
		gens: append(others, target), patchBase: inst.DeepCopy()}
	return s.quietSwap(target)
}

func gensOf(bs []gb) []*v1.Generation {
	gens := []*v1.Generation{}
	for _, b := range bs {
		gens = append(gens, b.g)
	}
	return gens
}
