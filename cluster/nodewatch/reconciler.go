package nodewatch

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// fieldNodeName indexes Instances by their node, to find them from a
// Lease or an Enrollment.
const fieldNodeName = "spec.nodeName"

// Reconciler writes each Instance's node health (Health) to its status.
type Reconciler struct {
	Client client.Client
	// LeaseNamespace holds the agents' Leases, one per node, named after
	// it.
	LeaseNamespace string
	Clock          clock.PassiveClock
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances,verbs=get;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch

// Reconcile sets the node-health conditions on one Instance and looks
// again when its node's Lease runs out.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	node := inst.Spec.NodeName
	if node == "" {
		return ctrl.Result{}, nil
	}
	f := Facts{Node: node, Now: r.Clock.Now()}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: node}, &v1.Enrollment{}); {
	case err == nil:
		f.Enrolled = true
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("enrollment %s: %w", node, err)
	}
	lease := &coordinationv1.Lease{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.LeaseNamespace, Name: node}, lease); {
	case err == nil:
		f.Lease = lease
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("lease of %s: %w", node, err)
	}
	v := Health(f)
	before := inst.DeepCopy()
	// What nodewatch wrote before and no longer holds goes (the agent's
	// own word, once it writes again, is left alone).
	for _, typ := range []string{v1.ConditionReady, v1.ConditionReconciling} {
		c := meta.FindStatusCondition(inst.Status.Conditions, typ)
		if c != nil && (c.Reason == v1.ReasonNodeLost || c.Reason == v1.ReasonNoAgent) && !v.sets(typ) {
			meta.RemoveStatusCondition(&inst.Status.Conditions, typ)
		}
	}
	for _, c := range v.Conditions {
		c.ObservedGeneration = inst.Generation
		meta.SetStatusCondition(&inst.Status.Conditions, c)
	}
	// The agent writes the same conditions list: the write lands only on
	// the version read here (a conflict is retried from a fresh read, as
	// what nodewatch removes depends on what it read).
	if !equality.Semantic.DeepEqual(before.Status, inst.Status) {
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Status().Patch(ctx, inst, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if v.Recheck > 0 {
		return ctrl.Result{RequeueAfter: v.Recheck + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches Instances, and the Leases and Enrollments of
// their nodes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1.Instance{}, fieldNodeName, func(o client.Object) []string {
		return []string{o.(*v1.Instance).Spec.NodeName}
	}); err != nil {
		return err
	}
	onNode := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1.InstanceList
		if err := r.Client.List(ctx, &list, client.MatchingFields{fieldNodeName: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&i)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodewatch").
		For(&v1.Instance{}).
		Watches(&coordinationv1.Lease{}, onNode).
		Watches(&v1.Enrollment{}, onNode).
		Complete(r)
}
