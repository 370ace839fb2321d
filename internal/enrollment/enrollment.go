// Package enrollment holds what every reader and writer of a node's
// Enrollment shares, on either side: the node agent's reconciler and
// endpoint today, the cluster side's placement as it reads them.
package enrollment

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Ensure returns node's Enrollment, creating it (not approved) when it
// does not exist yet: the enrollment reconciler and the agent's endpoint
// publisher both need it, whichever comes first.
func Ensure(ctx context.Context, c client.Client, node string) (*v1.Enrollment, error) {
	var enr v1.Enrollment
	err := c.Get(ctx, client.ObjectKey{Name: node}, &enr)
	if apierrors.IsNotFound(err) {
		enr = v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}
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
