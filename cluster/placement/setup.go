package placement

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// fieldNodes indexes Instances by the nodes they are bound to: spec's and,
// during a move, status's.
const fieldNodes = "placement.nodes"

// SetupWithManager watches Instances; Enrollments and Leases (a node
// that changes may now take the Instances waiting for one, or must be
// left by its own); and deleted Instances (their room is free again).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.SpreadLabel == "" {
		r.SpreadLabel = DefaultSpreadLabel
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1.Instance{}, fieldNodes, func(o client.Object) []string {
		i := o.(*v1.Instance)
		return []string{i.Spec.NodeName, i.Status.NodeName}
	}); err != nil {
		return err
	}
	onNode := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.affected(ctx, o.GetName())
	})
	onDelete := handler.Funcs{DeleteFunc: func(ctx context.Context, _ event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, k := range r.waitingKeys() {
			q.Add(reconcile.Request{NamespacedName: k})
		}
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("placement").
		For(&v1.Instance{}).
		Watches(&v1.Instance{}, onDelete).
		Watches(&v1.Enrollment{}, onNode).
		Watches(&coordinationv1.Lease{}, onNode, builderPredicate(r)).
		Complete(r)
}

// affected are the Instances a change of node concerns: those waiting for
// a node, and those bound to it.
func (r *Reconciler) affected(ctx context.Context, node string) []reconcile.Request {
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	add := func(k types.NamespacedName) {
		if !seen[k] {
			seen[k] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: k})
		}
	}
	for _, k := range r.waitingKeys() {
		add(k)
	}
	var list v1.InstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{fieldNodes: node}); err == nil {
		for i := range list.Items {
			add(client.ObjectKeyFromObject(&list.Items[i]))
		}
	}
	return reqs
}
