package controllers

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/runtime/boot"
)

// TestRebootProofPendingUntilRead: a generation of the old boot stays
// pending after its status is written gone, for as long as reads return
// the version from before the write (a cache behind), so no reconcile
// takes it for a live one and retires it over the proof; once a read
// shows the write, it is done.
func TestRebootProofPendingUntilRead(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "app-g1"}
	stale := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "g1"},
		Spec: v1.GenerationSpec{Instance: "app", Number: 1, NodeName: "n1"}}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Generation{}).WithObjects(stale.DeepCopy()).Build()
	behind := true
	cache := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if g, ok := obj.(*v1.Generation); ok && behind {
			// The version from before any status write, retired since.
			stale.DeepCopyInto(g)
			g.Spec.Retired = true
			return nil
		}
		return cl.Get(ctx, k, obj, opts...)
	}})
	proof := &rebootProof{rec: &boot.Record{PendingPath: filepath.Join(t.TempDir(), "pending.json")}, log: logr.Discard()}
	proof.load(context.Background(), c, boot.Pending{Previous: "a", Current: "b", Generations: []string{proofKey(key.Namespace, key.Name, "g1")}})
	r := &GenerationReconciler{Client: cache, NodeName: "n1", reboot: proof}

	for i := range 2 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile %d behind the write: %v", i, err)
		}
		if _, pending := proof.pending(stale); !pending {
			t.Fatalf("reconcile %d: done while every read is from before the write", i)
		}
	}
	var written v1.Generation
	if err := c.Get(context.Background(), key, &written); err != nil {
		t.Fatal(err)
	}
	if got := condition(written.Status.Conditions, v1.ConditionTerminated); got != "True/NodeRebooted" {
		t.Fatalf("written Terminated = %s, want True/NodeRebooted", got)
	}

	behind = false
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if _, pending := proof.pending(stale); pending {
		t.Errorf("still pending once a read shows the write")
	}
	if err := c.Get(context.Background(), key, &written); err != nil {
		t.Fatal(err)
	}
	if got := condition(written.Status.Conditions, v1.ConditionTerminated); got != "True/NodeRebooted" {
		t.Errorf("after the read caught up, Terminated = %s, want True/NodeRebooted", got)
	}
}
