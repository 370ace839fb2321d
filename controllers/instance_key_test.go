package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/instancekey"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// startKeyMinter runs the cluster side's key controller, as `unitlet
// cluster` does beside the agents; not its claims' release: this suite
// tests what the agent alone does with a claim whose holder is gone
// (TestStaleClaimIsTakenOverOnItsNode).
func startKeyMinter(ctx context.Context) error { return keyminter.StartKeys(ctx, env.Config) }

func TestPredecessorFingerprint(t *testing.T) {
	gen := func(n int64, fp string) *v1.Generation {
		return &v1.Generation{Spec: v1.GenerationSpec{Number: n, KeyFingerprint: fp}}
	}
	tests := map[string]struct {
		gens []*v1.Generation
		n    int64
		want string
	}{
		"first":                      {gens: []*v1.Generation{gen(1, "a")}, n: 1, want: ""},
		"the one just below":         {gens: []*v1.Generation{gen(1, "a"), gen(2, "b"), gen(3, "c")}, n: 3, want: "b"},
		"a pruned one skipped":       {gens: []*v1.Generation{gen(1, "a"), gen(4, "c")}, n: 4, want: "a"},
		"newer ones ignored":         {gens: []*v1.Generation{gen(1, "a"), gen(2, "b"), gen(3, "c")}, n: 2, want: "a"},
		"made before keys":           {gens: []*v1.Generation{gen(1, ""), gen(2, "b")}, n: 2, want: ""},
		"not listed yet (the cache)": {gens: []*v1.Generation{gen(1, "a")}, n: 2, want: "a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, predecessorFingerprint(tc.gens, tc.n)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// keySecret reads the Instance's key Secret as the cluster side wrote it.
func keySecret(t *testing.T, inst *v1.Instance) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: instancekey.DefaultNamespace, Name: instancekey.SecretName(inst.UID)}, s); err != nil {
		t.Fatalf("key secret of %s: %v", inst.Name, err)
	}
	return s
}

// waitPrepared waits until generation n of inst reads Prepared=want.
func waitPrepared(t *testing.T, inst string, n int64, want string) *v1.Generation {
	t.Helper()
	var g *v1.Generation
	testutil.Eventually(t, fmt.Sprintf("%s generation %d Prepared=%s", inst, n, want), waitLimit, pollEvery, func() (bool, string) {
		if g = getGeneration(t, inst, n); g == nil {
			return false, "no generation"
		}
		return condition(g.Status.Conditions, v1.ConditionPrepared) == want, conditionsOf(g.Status.Conditions)
	})
	return g
}

func appRef(name string, n int64) node.Ref { return node.GenerationRef("default", name, n) }

// The key minted for the Instance is the one every generation, the seed
// and each sidecar start with, and the one each generation was made for.
func TestInstanceKeyGivenToEveryGeneration(t *testing.T) {
	create(t, instance("keyed", withSeed, withSidecars("worker")))
	testutil.Eventually(t, "seed started", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start keyed/seed") == 1, "" })
	fake.exit(roleRef("keyed", layout.RoleSeed), 0)
	kube.WaitServing(t, "keyed", 1)
	updateInstance(t, "keyed", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	inst := kube.WaitServing(t, "keyed", 2)
	key := string(keySecret(t, inst).Data[instancekey.DataKey])
	if inst.Status.KeyFingerprint != instancekey.Fingerprint([]byte(key)) || len(key) != 64 {
		t.Fatalf("status fingerprint %s is not the Secret's key's", inst.Status.KeyFingerprint)
	}
	got := map[string]string{
		"seed": fake.Key(roleRef("keyed", layout.RoleSeed)), "sidecar": fake.Key(node.SidecarRef("default", "keyed", "worker")),
		"gen1": fake.Key(appRef("keyed", 1)), "gen2": fake.Key(appRef("keyed", 2)),
		"gen1 made for": getGeneration(t, "keyed", 1).Spec.KeyFingerprint, "gen2 made for": getGeneration(t, "keyed", 2).Spec.KeyFingerprint,
	}
	want := map[string]string{"seed": key, "sidecar": key, "gen1": key, "gen2": key,
		"gen1 made for": inst.Status.KeyFingerprint, "gen2 made for": inst.Status.KeyFingerprint}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want,+got):\n%s", diff)
	}
}

// A key changed outside a rotation, or gone, holds the next start; the
// serving generation keeps serving.
func TestInstanceKeyGateRefusesStart(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, s *corev1.Secret)
		want   string
	}{
		"tampered": {want: "False/" + v1.ReasonInstanceKeyMismatch, change: func(t *testing.T, s *corev1.Secret) {
			s.Data[instancekey.DataKey] = []byte("a key of someone's choosing")
			if err := k8s.Update(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}},
		"deleted": {want: "False/" + v1.ReasonInstanceKeyUnavailable, change: func(t *testing.T, s *corev1.Secret) {
			if err := k8s.Delete(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			iname := "gate-" + name
			create(t, instance(iname))
			inst := kube.WaitServing(t, iname, 1)
			tc.change(t, keySecret(t, inst))
			updateInstance(t, iname, func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
			waitPrepared(t, iname, 2, tc.want)
			if n := fake.Count("start " + iname + "/g2"); n != 0 {
				t.Errorf("generation 2 was started %d times", n)
			}
			if got := getInstance(t, iname).Status.ActiveGeneration; got != 1 {
				t.Errorf("active generation %d, want 1 still serving", got)
			}
		})
	}
}

// A rotation rolls a new generation, which starts with the new key.
func TestInstanceKeyRotationRollsGeneration(t *testing.T) {
	create(t, instance("rotated"))
	inst := kube.WaitServing(t, "rotated", 1)
	old := string(keySecret(t, inst).Data[instancekey.DataKey])
	updateInstance(t, "rotated", func(i *v1.Instance) {
		i.Annotations = map[string]string{v1.AnnotationRotateKey: "1"}
	})
	inst = kube.WaitServing(t, "rotated", 2)
	key := string(keySecret(t, inst).Data[instancekey.DataKey])
	got := []string{fake.Key(appRef("rotated", 1)), fake.Key(appRef("rotated", 2)), getGeneration(t, "rotated", 2).Spec.KeyFingerprint}
	if diff := cmp.Diff([]string{old, key, instancekey.Fingerprint([]byte(key))}, got); diff != "" || key == old {
		t.Errorf("gen 1 key, gen 2 key, gen 2 fingerprint (-want,+got):\n%s", diff)
	}
}

// Without its key an Instance makes no generation and says why; a
// generation already made (before keys) is not held by it.
func TestAwaitKey(t *testing.T) {
	tests := map[string]struct {
		fingerprint string
		gens        []*v1.Generation
		wantDone    bool
		want        string // Reconciling, as "Status/Reason"
	}{
		"no key, no generation":         {wantDone: true, want: "True/" + v1.ReasonInstanceKeyUnavailable},
		"key minted":                    {fingerprint: "fp", want: "absent"},
		"a generation from before keys": {gens: []*v1.Generation{{Spec: v1.GenerationSpec{Number: 1}}}, want: "absent"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := instance("await")
			inst.Status.KeyFingerprint = tc.fingerprint
			s := &instanceScope{inst: inst, gens: tc.gens}
			if _, err := (&InstanceReconciler{}).awaitKey(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			reconciling := "absent"
			if s.note.reason != "" {
				computeInstanceStatus(inst, tc.gens, s.note, true)
				reconciling = condition(inst.Status.Conditions, v1.ConditionReconciling)
			}
			got := fmt.Sprintf("done=%v reconciling=%s", s.done, reconciling)
			if diff := cmp.Diff(fmt.Sprintf("done=%v reconciling=%s", tc.wantDone, tc.want), got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// preparingRuntime answers every start as the node's prepare cut short
// by ctx (context canceled once it ended) or failed on its own.
type preparingRuntime struct{ *fakeRuntime }

func (p preparingRuntime) Start(ctx context.Context, _ node.StartRequest) node.StartResult {
	cause := ctx.Err()
	if cause == nil {
		cause = errors.New("prepare: no space left on device")
	}
	return node.StartResult{Start: outcome.Start{Kind: outcome.NotStarted, Cause: &node.PrepareError{Err: cause}}}
}

// failingSecrets fails every Secret read: with ctx's error once it ended,
// as the API server's timeout otherwise.
var failingSecrets = interceptor.Funcs{
	Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			if ctx.Err() != nil {
				return fmt.Errorf("get secret: %w", ctx.Err())
			}
			return errors.New("etcdserver: request timed out")
		}
		return cl.Get(ctx, key, obj, opts...)
	}}

// TestStoppingSaysNothingOfTheStart: a start's step (the key's read, the
// slot's prepare) cut short by the agent stopping (a rollout) is not
// written as that step's fault; one that failed on its own is.
func TestStoppingSaysNothingOfTheStart(t *testing.T) {
	inst := instance("stopping", func(i *v1.Instance) { i.UID = "u-stopping" })
	steps := map[string]struct {
		fingerprint string
		runtime     node.Runtime
		funcs       interceptor.Funcs
		fault       func(*genFacts) error
	}{
		"key": {fingerprint: "fp", runtime: newFakeRuntime(), funcs: failingSecrets,
			fault: func(f *genFacts) error { return f.keyErr }},
		"prepare": {runtime: preparingRuntime{newFakeRuntime()},
			fault: func(f *genFacts) error { return f.prepareErr }},
	}
	for name, tc := range map[string]struct {
		step    string
		cancel  bool
		wantErr bool
	}{
		"the key, the agent stopping":     {step: "key", cancel: true},
		"the key, the API refusing":       {step: "key", wantErr: true},
		"the prepare, the agent stopping": {step: "prepare", cancel: true},
		"the prepare, the disk full":      {step: "prepare", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			step := steps[tc.step]
			gen := generation(1, "a").g
			gen.Name, gen.Namespace, gen.Spec.Instance, gen.Spec.NodeName, gen.Spec.KeyFingerprint = generationName("stopping", 1), "default", "stopping", testNode, step.fingerprint
			c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(inst.DeepCopy()).WithInterceptorFuncs(step.funcs).Build()
			r := &GenerationReconciler{Client: c, Reader: c, Runtime: step.runtime, NodeName: testNode, KeyNamespace: "unitlet-keys", Clock: clock.RealClock{}}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			s := &generationScope{gen: gen}
			if _, err := r.start(ctx, s); err == nil {
				t.Fatalf("the %s failed, and start said nothing", tc.step)
			}
			if got := step.fault(&s.facts); (got != nil) != tc.wantErr {
				t.Errorf("the %s's fault recorded: %v, want one: %v", tc.step, got, tc.wantErr)
			}
		})
	}
}
