package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestAddFinalizerOnAStaleRead: the lease taken on a version that changed
// since it was read (the key minter writes every new Instance at the same
// moment) is taken on the latest at once, not after a failed reconcile's
// second of backoff; on another Instance of the name, not at all.
func TestAddFinalizerOnAStaleRead(t *testing.T) {
	cases := map[string]struct {
		readUID      types.UID
		wantConflict bool
		wantLease    bool
	}{
		"the same Instance, written meanwhile": {readUID: "u1", wantLease: true},
		"another Instance of the name now":     {readUID: "u0", wantConflict: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stored := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i", UID: "u1"},
				Status: v1.InstanceStatus{KeyFingerprint: "fp"}}
			c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}).WithObjects(stored).Build()
			read := stored.DeepCopy()
			read.UID, read.ResourceVersion, read.Status = tc.readUID, "1", v1.InstanceStatus{}
			err := (&InstanceReconciler{Client: c, Reader: c}).addFinalizer(context.Background(), read)
			if apierrors.IsConflict(err) != tc.wantConflict || (err != nil && !tc.wantConflict) {
				t.Fatalf("addFinalizer: %v, want a conflict: %v", err, tc.wantConflict)
			}
			got := &v1.Instance{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), got); err != nil {
				t.Fatal(err)
			}
			if controllerutil.ContainsFinalizer(got, v1.Finalizer) != tc.wantLease {
				t.Errorf("finalizers %v, want the lease: %v", got.Finalizers, tc.wantLease)
			}
			if tc.wantLease && got.Status.KeyFingerprint != "fp" {
				t.Errorf("the status written meanwhile was lost: %+v", got.Status)
			}
		})
	}
}

// TestDeletionWrites: a deletion writes the Instance's status at most
// once while it waits for its Generations (not again as each one ends;
// not at all where the Instance had settled and they stop as they
// should), and nothing once its lease is let go (the Instance is gone
// then).
func TestDeletionWrites(t *testing.T) {
	cases := map[string]struct {
		conditions []metav1.Condition
		first      int // status writes of the deletion's first reconcile
	}{
		"settled before its deletion: quiet":   {conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled}}},
		"not settled: the deletion is written": {first: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deletionWrites(t, tc.conditions, tc.first)
		})
	}
}

func deletionWrites(t *testing.T, conditions []metav1.Condition, first int) {
	now := metav1.Now()
	inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "u1", Finalizers: []string{v1.Finalizer},
		DeletionTimestamp: &now}, Spec: v1.InstanceSpec{NodeName: "n1", Host: "app.example.com"}, Status: v1.InstanceStatus{Conditions: conditions}}
	claim := claimOf("app.example.com", "ns", "app", "u1", "n1")
	claim.Labels = map[string]string{v1.LabelHolderUID: "u1"} // as createClaim labels it
	gens := []*v1.Generation{}
	for n := range int64(2) {
		gens = append(gens, &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: generationName("app", n+1),
			Labels: map[string]string{v1.LabelInstance: "app"}, Finalizers: []string{v1.Finalizer}},
			Spec: v1.GenerationSpec{Instance: "app", Number: n + 1, NodeName: "n1"}})
	}
	statusWrites, claimWrites := 0, 0
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}, &v1.Generation{}).
		WithIndex(&v1.Generation{}, indexGenerationInstance, generationInstance).
		WithObjects(inst, gens[0], gens[1], claim).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*v1.HostClaim); ok {
				claimWrites++
			}
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*v1.Instance); ok {
				statusWrites++
			}
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	r := &InstanceReconciler{Client: c, Reader: c, Runtime: newFakeRuntime(), NodeName: "n1", Gate: hostgate.Always{},
		Clock: clocktesting.NewFakePassiveClock(now.Time)}
	reconcile := func(step string, want int) {
		t.Helper()
		statusWrites = 0
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if statusWrites != want {
			t.Errorf("%s: %d status writes, want %d", step, statusWrites, want)
		}
	}
	// Each Generation is gone once its reconciler lets its lease go.
	letGo := func(g *v1.Generation) {
		t.Helper()
		cur := &v1.Generation{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(g), cur); err != nil {
			t.Fatal(err)
		}
		controllerutil.RemoveFinalizer(cur, v1.Finalizer)
		if err := c.Update(context.Background(), cur); err != nil {
			t.Fatal(err)
		}
	}

	reconcile("both generations deleted", first)
	letGo(gens[0])
	reconcile("one generation left", 0)
	letGo(gens[1])
	reconcile("none left: the lease let go", 0)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(inst), &v1.Instance{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Instance after its lease was let go: %v, want gone", err)
	}
	// The host's claim is the cluster side's to give back (or an heir's
	// on this node to take over): not a write of the deletion.
	if claimWrites != 0 {
		t.Errorf("%d HostClaim deletes, want none", claimWrites)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(claim), &v1.HostClaim{}); err != nil {
		t.Errorf("the claim after the deletion: %v, want kept", err)
	}
}

// TestRetiredEventOnDeletion: a Generation deleted with its Instance has
// no Retired Event of its own (the Instance's Released says every unit of
// it is proven gone); one retired while its Instance stays has.
func TestRetiredEventOnDeletion(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		instDeleting, genDeleting bool
		want                      int
	}{
		"deleted with its Instance":           {instDeleting: true, genDeleting: true},
		"deleted alone":                       {genDeleting: true, want: 1},
		"retired by a swap":                   {want: 1},
		"retired while its Instance is going": {instDeleting: true, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Finalizers: []string{v1.Finalizer}}}
			gen := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-g1", Finalizers: []string{v1.Finalizer}},
				Spec: v1.GenerationSpec{Instance: "app", Number: 1}}
			if tc.instDeleting {
				inst.DeletionTimestamp = &now
			}
			if tc.genDeleting {
				gen.DeletionTimestamp = &now
			}
			rec := events.NewFakeRecorder(4)
			r := &GenerationReconciler{Client: crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(inst).Build(), Recorder: rec}
			r.emit(context.Background(), gen, genEvent{typ: corev1.EventTypeNormal, reason: v1.ReasonRetired, action: "Retire", msg: "generation 1 proven gone"})
			if got := len(rec.Events); got != tc.want {
				t.Errorf("%d Retired events, want %d", got, tc.want)
			}
		})
	}
}

// TestGenerationReleaseWrites: a deleted Generation proven gone has its
// lease let go and no status written after (it is gone then); its proof
// is still an Event.
func TestGenerationReleaseWrites(t *testing.T) {
	now := metav1.Now()
	gen := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-g1", UID: "g1", Finalizers: []string{v1.Finalizer},
		DeletionTimestamp: &now}, Spec: v1.GenerationSpec{Instance: "app", Number: 1, NodeName: "n1"}}
	statusWrites := 0
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Generation{}).
		WithObjects(gen).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			statusWrites++
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	rec := events.NewFakeRecorder(4)
	r := &GenerationReconciler{Client: c, Reader: c, Runtime: newFakeRuntime(), NodeName: "n1", Gate: hostgate.Always{}, Recorder: rec,
		Clock: clock.RealClock{}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(gen)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(gen), &v1.Generation{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Generation after its release: %v, want gone", err)
	}
	if statusWrites != 0 {
		t.Errorf("%d status writes after the release, want none", statusWrites)
	}
	if len(rec.Events) != 1 {
		t.Errorf("%d events, want the Retired one (its status goes with it)", len(rec.Events))
	}
}

// TestGenerationLetGoOnce: a Generation this process let go is not let go
// again by a reconcile that reads a cache older than its deletion; once
// the cache shows it gone, a Generation of the same name is another one
// and is handled.
func TestGenerationLetGoOnce(t *testing.T) {
	now := metav1.Now()
	gen := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-g1", UID: "g1", Finalizers: []string{v1.Finalizer},
		DeletionTimestamp: &now}, Spec: v1.GenerationSpec{Instance: "app", Number: 1, NodeName: "n1"}}
	stale, updates := gen.DeepCopy(), 0
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Generation{}).
		WithObjects(gen).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if g, ok := obj.(*v1.Generation); ok && stale != nil && updates > 0 {
				stale.DeepCopyInto(g) // the cache before the deletion's event
				return nil
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			return cl.Update(ctx, obj, opts...)
		}}).Build()
	r := &GenerationReconciler{Client: c, Reader: c, Runtime: newFakeRuntime(), NodeName: "n1", Gate: hostgate.Always{},
		Recorder: events.NewFakeRecorder(4), Clock: clock.RealClock{}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(gen)}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if updates != 1 {
		t.Errorf("%d finalizer removals, want 1", updates)
	}
	stale = nil // the cache shows it gone
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	stale = gen.DeepCopy()
	stale.UID = "g1-again"
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if updates != 2 {
		t.Errorf("%d finalizer removals, want the other Generation's too (2)", updates)
	}
}
