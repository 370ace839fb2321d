package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Observer logs the Instances placed on this node as the cache sees them.
// It changes nothing; it is what the agent does until it hosts.
type Observer struct {
	Client   client.Client
	NodeName string
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances;generations,verbs=get;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;list;watch

// Reconcile logs one line per change of an Instance on this node.
func (o *Observer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var inst hostingv1alpha1.Instance
	if err := o.Client.Get(ctx, req.NamespacedName, &inst); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("instance gone")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log.Info("instance seen", "host", inst.Spec.Host, "node", inst.Spec.NodeName,
		"generation", inst.Generation, "strategy", inst.Spec.Strategy, "suspend", inst.Spec.Suspend)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the observer.
func (o *Observer) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hostingv1alpha1.Instance{}).
		Named("observer").
		Complete(o)
}
