// Package statuswrite is how the node agent writes an Instance's status.
// nodewatch writes conditions of the same Instances (NodeLost, NoAgent):
// neither writer may drop what the other wrote.
package statuswrite

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Instance writes inst's status, computed from base, with base's
// resourceVersion as the precondition: it lands only on the version it was
// computed from. On a conflict (nodewatch wrote in between) the changes
// from base to inst are rebased onto the latest version, read from
// latest (uncached), and written again under the same lock, a few times
// at most; the last conflict is returned, for the reconcile to be retried.
// A vanished Instance is no error. inst ends as what was written.
func Instance(ctx context.Context, c client.Client, latest client.Reader, inst, base *v1.Instance) error {
	if equality.Semantic.DeepEqual(base.Status, inst.Status) {
		return nil
	}
	mine, from := inst.Status.DeepCopy(), base.Status.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Status().Patch(ctx, inst, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &v1.Instance{}
		if err := latest.Get(ctx, client.ObjectKeyFromObject(inst), fresh); err != nil {
			return fmt.Errorf("read the latest after a conflict: %w", err)
		}
		base = fresh
		fresh.DeepCopyInto(inst)
		inst.Status = Rebase(*from, *mine, fresh.Status)
		if equality.Semantic.DeepEqual(fresh.Status, inst.Status) {
			return nil // the latest already says it all
		}
		return err
	})
	return client.IgnoreNotFound(err)
}

// Rebase is the agent's status mine, computed from base, laid over
// theirs, the latest: every field but the conditions is the agent's alone
// and taken from mine. A condition the agent left as it found it in base
// is theirs (nodewatch's word stands); one it set, changed or removed is
// its own (the agent is alive and just looked; nodewatch, which watches
// the Instance, looks again at what results).
func Rebase(base, mine, theirs v1.InstanceStatus) v1.InstanceStatus {
	out := *mine.DeepCopy()
	out.Conditions = nil
	for _, t := range theirs.Conditions {
		b, m := find(base.Conditions, t.Type), find(mine.Conditions, t.Type)
		switch {
		case same(b, m):
			out.Conditions = append(out.Conditions, t)
		case m != nil:
			out.Conditions = append(out.Conditions, *m)
		}
	}
	for _, m := range mine.Conditions {
		if find(theirs.Conditions, m.Type) == nil && !same(find(base.Conditions, m.Type), &m) {
			out.Conditions = append(out.Conditions, m)
		}
	}
	return out
}

func find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func same(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equality.Semantic.DeepEqual(*a, *b)
}
