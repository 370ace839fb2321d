package placement

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/cluster/nodewatch"
	"github.com/unitlet/unitlet/internal/nodelease"
)

// nodes reads every Enrollment as placement sees it: lost or not (by
// nodewatch's Health), and what is bound there (the cache's Instances and
// the ledger's bindings it does not show yet).
func (r *Reconciler) nodes(ctx context.Context) ([]Node, error) {
	var enrs v1.EnrollmentList
	if err := r.Client.List(ctx, &enrs); err != nil {
		return nil, fmt.Errorf("list enrollments: %w", err)
	}
	var leases coordinationv1.LeaseList
	if err := r.Client.List(ctx, &leases, client.InNamespace(r.LeaseNamespace)); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	var insts v1.InstanceList
	if err := r.Client.List(ctx, &insts); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	byNode := r.ledger.BoundByNode(insts.Items, r.SpreadLabel)
	now := r.Clock.Now()
	out := make([]Node, len(enrs.Items))
	for i := range enrs.Items {
		e := &enrs.Items[i]
		lost, _ := nodewatch.Lost(nodewatch.Facts{Node: e.Name, Enrolled: true, Lease: r.leaseOf(leases.Items, e.Name), Now: now})
		out[i] = Node{Enrollment: e, Lost: lost, Bound: byNode[e.Name]}
	}
	return out, nil
}

// health reads what a move off node is decided from.
func (r *Reconciler) health(ctx context.Context, node string) (NodeHealth, error) {
	var h NodeHealth
	enr := &v1.Enrollment{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: node}, enr); {
	case apierrors.IsNotFound(err):
		return h, nil
	case err != nil:
		return h, fmt.Errorf("enrollment %s: %w", node, err)
	}
	h.Enrolled, h.Approved = true, enr.Spec.Approved
	f := nodewatch.Facts{Node: node, Enrolled: true, Now: r.Clock.Now()}
	lease := &coordinationv1.Lease{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.LeaseNamespace, Name: node}, lease); {
	case err == nil:
		f.Lease = lease
	case !apierrors.IsNotFound(err):
		return h, fmt.Errorf("lease of %s: %w", node, err)
	}
	h.Lost, h.LostSince = nodewatch.Lost(f)
	if h.Lost && h.LostSince.IsZero() {
		// No Lease ever said when: lost since it enrolled.
		h.LostSince = enr.CreationTimestamp.Time
	}
	h.Expiry, _ = nodelease.Expiry(f.Lease)
	return h, nil
}

// bind writes inst's spec.nodeName = node in one write that lands only on
// the version decided from (its resourceVersion), removing a drain's
// move-from; then the Event and the Scheduled condition. from is a
// move's source ("" for a first binding).
func (r *Reconciler) bind(ctx context.Context, inst *v1.Instance, node, from, why string) error {
	before := inst.DeepCopy()
	inst.Spec.NodeName = node
	delete(inst.Annotations, v1.AnnotationMoveFrom)
	if err := r.Client.Patch(ctx, inst, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed (or gone) since read: decided again from the new version.
			log.FromContext(ctx).V(1).Info("binding refused: the Instance changed", "node", node, "error", err.Error())
			return client.IgnoreNotFound(err)
		}
		return fmt.Errorf("bind to %s: %w", node, err)
	}
	r.ledger.Assume(inst.UID, node)
	c := metav1.Condition{Type: v1.ConditionScheduled, Status: metav1.ConditionTrue,
		Reason: v1.ReasonBound, Message: fmt.Sprintf("bound to node %s", node)}
	if from != "" {
		c.Reason, c.Message = v1.ReasonMoving, fmt.Sprintf("moving from %s to %s: %s", from, node, why)
		r.Recorder.Eventf(inst, nil, corev1.EventTypeNormal, v1.ReasonMoving, "Move", "Moving from %s to %s: %s", from, node, why)
	} else {
		r.Recorder.Eventf(inst, nil, corev1.EventTypeNormal, "Scheduled", "Bind", "Successfully assigned %s/%s to %s", inst.Namespace, inst.Name, node)
	}
	log.FromContext(ctx).Info("bound", "node", node, "from", from)
	r.setPending(inst.UID, &c)
	return r.setScheduled(ctx, inst, c, false)
}

// setScheduled sets the Scheduled condition as nodewatch writes its
// conditions: a patch of the conditions list landing only on the version
// read (the agent writes the same list), read again and retried on a
// conflict. ifAbsent: only where no Scheduled condition is (a pin, which
// a cache lagging behind this controller's own Bound must not overwrite).
// A new Instance's first status also says Reconciling (v1.AwaitingAgent)
// when it is placed, as the key minter's does when it comes first.
func (r *Reconciler) setScheduled(ctx context.Context, inst *v1.Instance, c metav1.Condition, ifAbsent bool) error {
	cur := inst
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if ifAbsent && meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionScheduled) != nil {
			return nil
		}
		before := cur.DeepCopy()
		c.ObservedGeneration = cur.Generation
		changed := meta.SetStatusCondition(&cur.Status.Conditions, c)
		if c.Status == metav1.ConditionTrue && cur.Status.ObservedGeneration == 0 && cur.Status.ActiveGeneration == 0 &&
			meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionReconciling) == nil {
			// A new Instance's first status, as the key minter's would be.
			awaiting := v1.AwaitingAgent(cur.Generation, c.Message)
			changed = meta.SetStatusCondition(&cur.Status.Conditions, awaiting) || changed
		}
		if !changed {
			return nil
		}
		err := r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &v1.Instance{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(inst), fresh); err != nil {
			return fmt.Errorf("read the latest after a conflict: %w", err)
		}
		cur = fresh
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("condition Scheduled: %w", err)
	}
	r.setPending(inst.UID, nil)
	return nil
}
