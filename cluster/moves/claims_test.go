package moves

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// TestClaimFollowsItsHolder: a claim made from a node the Instance left
// follows it to its new node while the Instance lives (that node's agent
// watches only its own claims), and is given back once it is gone.
func TestClaimFollowsItsHolder(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, k8s := context.Background(), env.Client
	inst := &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "moved"},
		Spec: v1.InstanceSpec{Host: "moved.example.com", NodeName: "node-b", Template: v1.Template{
			Command: []string{"/bin/app"}, Tier: v1.Tier{Memory: tierQty("64Mi"), CPU: tierQty("100m"), Pids: 16}}},
	}
	if err := k8s.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	claim := &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: inst.Spec.Host, Labels: map[string]string{v1.LabelHolderUID: string(inst.UID)}},
		Spec: v1.HostClaimSpec{Namespace: inst.Namespace, Name: inst.Name, UID: inst.UID, NodeName: "node-a"}}
	if err := k8s.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	// The reconciler acts as the cluster side's account: its role
	// (config/nodewatch) must let it move and release claims.
	cfg, err := env.AsClusterSide(ctx)
	if err != nil {
		t.Fatal(err)
	}
	side, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	r := &ClaimReconciler{Client: side, Reader: side}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &v1.HostClaim{}
	if err := k8s.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatalf("the claim of a live holder was released: %v", err)
	}
	want := claim.Spec
	want.NodeName = "node-b"
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("the claim after its holder moved (-want,+got):\n%s", diff)
	}
	if err := k8s.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1.HostClaim{}); err == nil {
		t.Fatal("the claim of a gone holder is still held")
	}
}

// TestDecideClaim: a claim follows a live holder's node, stays while the
// holder is unplaced, and goes with its holder.
func TestDecideClaim(t *testing.T) {
	claim := &v1.HostClaim{Spec: v1.HostClaimSpec{Namespace: "shop", Name: "web", UID: "u-1", NodeName: "node-a"}}
	holder := func(uid types.UID, node string) *v1.Instance {
		return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: uid}, Spec: v1.InstanceSpec{NodeName: node}}
	}
	tests := map[string]struct {
		holder *v1.Instance
		want   ClaimAction
	}{
		"on the claim's node":         {holder: holder("u-1", "node-a"), want: ClaimKeep},
		"moved":                       {holder: holder("u-1", "node-b"), want: ClaimFollow},
		"not placed":                  {holder: holder("u-1", ""), want: ClaimKeep},
		"gone":                        {want: ClaimRelease},
		"re-created with another UID": {holder: holder("u-2", "node-a"), want: ClaimRelease},
		"re-created on another node":  {holder: holder("u-2", "node-b"), want: ClaimRelease},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecideClaim(claim, tc.holder)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func tierQty(s string) resource.Quantity { return resource.MustParse(s) }

// TestClaimHolderRead: a holder the cache shows keeps its claim with no
// read of the API server; one it does not show is read there before
// the claim is released.
func TestClaimHolderRead(t *testing.T) {
	const uid, oldUID = types.UID("u-2"), types.UID("u-1")
	holder := func(id types.UID) *v1.Instance {
		return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: id}}
	}
	tests := map[string]struct {
		cached, stored *v1.Instance // nil: absent
		apiErr         error
		wantReleased   bool
		wantAPIReads   int
		wantErr        bool
	}{
		"the cache shows it":                     {cached: holder(uid), stored: holder(uid), wantAPIReads: 0},
		"the cache is behind a holder just made": {stored: holder(uid), wantAPIReads: 1},
		"the cache shows an older holder; the API server a newer one": {
			cached: holder(oldUID), stored: holder(uid), wantAPIReads: 1},
		"re-created with another UID":   {cached: holder(oldUID), stored: holder(oldUID), wantReleased: true, wantAPIReads: 1},
		"deleted":                       {wantReleased: true, wantAPIReads: 1},
		"the API server cannot be read": {apiErr: errors.New("unavailable"), wantAPIReads: 1, wantErr: true},
		"the cache still shows a holder deleted since: kept until its deletion's event": {cached: holder(uid), wantAPIReads: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: "web.example.com", UID: "claim-1"},
				Spec: v1.HostClaimSpec{Namespace: "shop", Name: "web", UID: uid, NodeName: "node-a"}}
			cache := []client.Object{claim}
			if tc.cached != nil {
				cache = append(cache, tc.cached)
			}
			k8s := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cache...).Build()
			var stored []client.Object
			if tc.stored != nil {
				stored = append(stored, tc.stored)
			}
			reads := 0
			api := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(stored...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					if tc.apiErr != nil {
						return tc.apiErr
					}
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			r := &ClaimReconciler{Client: k8s, Reader: api}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			released := apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(claim), &v1.HostClaim{}))
			if diff := cmp.Diff(tc.wantReleased, released); diff != "" {
				t.Errorf("released (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAPIReads, reads); diff != "" {
				t.Errorf("reads of the API server (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHolderEvents: a claim hears of its holder's deletion and of its
// moves, not of its other edits (status writes, template edits).
func TestHolderEvents(t *testing.T) {
	on := func(node string) *v1.Instance {
		return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "default"}, Spec: v1.InstanceSpec{NodeName: node}}
	}
	for name, tc := range map[string]struct {
		passed func() bool
		want   bool
	}{
		"create":          {func() bool { return holderEvents.Create(event.CreateEvent{Object: on("a")}) }, false},
		"moved":           {func() bool { return holderEvents.Update(event.UpdateEvent{ObjectOld: on("a"), ObjectNew: on("b")}) }, true},
		"placed":          {func() bool { return holderEvents.Update(event.UpdateEvent{ObjectOld: on(""), ObjectNew: on("b")}) }, true},
		"edited, unmoved": {func() bool { return holderEvents.Update(event.UpdateEvent{ObjectOld: on("a"), ObjectNew: on("a")}) }, false},
		"deleted":         {func() bool { return holderEvents.Delete(event.DeleteEvent{Object: on("a")}) }, true},
		"generic":         {func() bool { return holderEvents.Generic(event.GenericEvent{Object: on("a")}) }, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.passed(); got != tc.want {
				t.Errorf("passed = %v, want %v", got, tc.want)
			}
		})
	}
}
