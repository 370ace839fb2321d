// Package statuswrite is how the node agent writes an Instance's status,
// which it shares with nodewatch.
package statuswrite

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Instance sends inst's status as a merge patch from base, only when it
// changed. A vanished Instance is no error.
func Instance(ctx context.Context, c client.Client, latest client.Reader, inst, base *v1.Instance) error {
	if equality.Semantic.DeepEqual(base.Status, inst.Status) {
		return nil
	}
	if err := c.Status().Patch(ctx, inst, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
