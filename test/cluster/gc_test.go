package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/enrollment"
	"github.com/unitlet/unitlet/internal/testkit/cluster"
)

// goneNode is a Node no kubelet registers: the test makes and deletes it.
const goneNode = "gc-node-without-kubelet"

// enrollmentGC: the real node's agent made its Enrollment owned by its
// Node (with the shipped RBAC and policies), and the cluster's garbage
// collector (kube-controller-manager) deletes an Enrollment with its
// Node: one created as the agent creates it (enrollment.Ensure) for a
// Node the test registers and then deletes.
func enrollmentGC(t *testing.T) {
	ctx := context.Background()
	var real corev1.Node
	if err := k8s.Get(ctx, client.ObjectKey{Name: cluster.NodeName}, &real); err != nil {
		t.Fatal(err)
	}
	enr := &v1.Enrollment{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: cluster.NodeName}, enr); err != nil {
		t.Fatal(err)
	}
	want := []metav1.OwnerReference{enrollment.NodeOwner(real.Name, real.UID)}
	if diff := cmp.Diff(want, enr.OwnerReferences); diff != "" {
		t.Errorf("the node's Enrollment's owners (-want,+got):\n%s", diff)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: goneNode}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, node)
		_ = k8s.Delete(ctx, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: goneNode}})
	})
	owned, err := enrollment.Ensure(ctx, k8s, goneNode)
	if err != nil {
		t.Fatal(err)
	}
	want = []metav1.OwnerReference{enrollment.NodeOwner(goneNode, node.UID)}
	if diff := cmp.Diff(want, owned.OwnerReferences); diff != "" {
		t.Fatalf("the created Enrollment's owners (-want,+got):\n%s", diff)
	}
	if err := k8s.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Enrollment deleted with its Node", 2*time.Minute, func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Name: goneNode}, &v1.Enrollment{})
		return apierrors.IsNotFound(err), fmt.Sprint("get: ", err)
	})
}
