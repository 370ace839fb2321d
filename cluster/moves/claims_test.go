package moves

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// TestClaimReleasedOnceHolderGone: a claim made from a node the Instance
// left stays while the Instance lives, and is given back once it is gone
// (no agent may release another node's claim).
func TestClaimReleasedOnceHolderGone(t *testing.T) {
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
	r := &ClaimReconciler{Client: k8s, Reader: k8s}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1.HostClaim{}); err != nil {
		t.Fatalf("the claim of a live holder was released: %v", err)
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

func tierQty(s string) resource.Quantity { return resource.MustParse(s) }
