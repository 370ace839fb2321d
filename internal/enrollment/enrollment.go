// Package enrollment holds what every reader and writer of a node's
// Enrollment shares, on either side: the node agent's reconciler and
// endpoint today, the cluster side's placement as it reads them.
package enrollment

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Ensure returns node's Enrollment, creating it (not approved) when it
// does not exist yet: the enrollment reconciler and the agent's endpoint
// publisher both need it, whichever comes first. A new Enrollment is
// owned by its Node when the Node can be read (see OwnerReferences);
// without it (no Node yet, or no right to read it) it is created
// unowned, and Own adds the owner later.
func Ensure(ctx context.Context, c client.Client, node string) (*v1.Enrollment, error) {
	var enr v1.Enrollment
	err := c.Get(ctx, client.ObjectKey{Name: node}, &enr)
	if apierrors.IsNotFound(err) {
		enr = v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}
		var n corev1.Node
		if c.Get(ctx, client.ObjectKey{Name: node}, &n) == nil {
			enr.OwnerReferences = OwnerReferences(nil, n.Name, n.UID)
		}
		err = c.Create(ctx, &enr)
		if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKey{Name: node}, &enr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("enrollment %s: %w", node, err)
	}
	return &enr, nil
}

// Own makes enr owned by its Node as the API server has it now (see
// OwnerReferences), with one patch when that changes its owners. It
// does nothing while the Node does not exist, and says whether it
// patched. The patch is optimistic: another writer's owners are not
// overwritten, a conflict is returned and the next call tries again.
func Own(ctx context.Context, c client.Client, enr *v1.Enrollment) (bool, error) {
	var n corev1.Node
	switch err := c.Get(ctx, client.ObjectKey{Name: enr.Name}, &n); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("node %s: %w", enr.Name, err)
	}
	want := OwnerReferences(enr.OwnerReferences, n.Name, n.UID)
	if equality.Semantic.DeepEqual(want, enr.OwnerReferences) {
		return false, nil
	}
	orig := enr.DeepCopy()
	enr.OwnerReferences = want
	if err := c.Patch(ctx, enr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("enrollment %s owner: %w", enr.Name, err)
	}
	return true, nil
}
