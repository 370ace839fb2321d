package controllers

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
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
