package approval

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// ReasonApprovedByPolicy is the reason of the Event the policy records
// on each Enrollment it approves.
const ReasonApprovedByPolicy = "ApprovedByPolicy"

// Reconciler approves the Enrollments whose Node matches Selector (see
// Approves). An Enrollment is named after its node: the policy
// unitlet-agent-node-scoped lets only that node's agent create it.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Selector labels.Selector
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile approves one Enrollment when the policy says so: one patch
// of spec.approved and the annotation, conditional on the Enrollment
// read (a concurrent change is decided again), and an Event.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	enr := &v1.Enrollment{}
	if err := r.Client.Get(ctx, req.NamespacedName, enr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	node := nodeMeta()
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: enr.Name}, node); {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("node %s: %w", enr.Name, err)
	}
	if !Approves(r.Selector, enr, node) {
		return ctrl.Result{}, nil
	}
	orig := enr.DeepCopy()
	enr.Spec.Approved = true
	if enr.Annotations == nil {
		enr.Annotations = map[string]string{}
	}
	enr.Annotations[AnnotationApprovedBy] = r.Selector.String()
	if err := r.Client.Patch(ctx, enr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("approve enrollment %s: %w", enr.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("approved by the policy", "selector", r.Selector.String())
	r.Recorder.Eventf(enr, nil, corev1.EventTypeNormal, ReasonApprovedByPolicy, "Approve",
		"approved by the cluster side's policy --approve-nodes=%s: Node %s matches", r.Selector.String(), enr.Name)
	return ctrl.Result{}, nil
}

// nodeMeta is an empty Node's metadata: only the Nodes' metadata is
// watched (their labels are all the policy reads).
func nodeMeta() *metav1.PartialObjectMetadata {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return n
}

// SetupWithManager runs the policy on each Enrollment's creation and spec
// or annotation change (not on its status, which the agents write), and
// on its Node's creation and label changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("approval").
		For(&v1.Enrollment{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(nodeMeta(), sameName, builder.OnlyMetadata, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
}
