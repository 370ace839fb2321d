package moves

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/watchfilter"
)

// ClaimReconciler deletes a HostClaim whose holder is gone. An agent
// releases its Instance's claims as its finalizer goes, but only those
// made from its own node (config/policy): a claim made before a move is
// left behind, and so is one whose node is gone. Once its holder is gone
// (deleted, or re-created with another UID: its finalizer proved every
// generation gone), nothing serves the host and it is given back here.
type ClaimReconciler struct {
	// Client reads claims and, first, their holders from the cache.
	Client client.Client
	// Reader reads a holder the cache does not show from the API server:
	// a cache behind an Instance just made must not make it look gone.
	Reader client.Reader
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=hostclaims,verbs=get;list;watch;delete

// Reconcile deletes one claim if its holder is gone.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &v1.HostClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	gone, err := r.holderGone(ctx, claim)
	if err != nil || !gone {
		return ctrl.Result{}, err
	}
	if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("release host %s: %w", claim.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("host released: its holder is gone", "host", claim.Name,
		"holderNamespace", claim.Spec.Namespace, "holderName", claim.Spec.Name, "node", claim.Spec.NodeName)
	return ctrl.Result{}, nil
}

// holderGone: claim's holder is deleted, or re-created with another UID.
// A holder the cache shows is taken as there without asking the API
// server (every claim made in a mass create would cost a read): if it
// has gone since, its deletion's event brings the claim back here. Only
// a holder the cache does not show is read from the API server before
// its claim is released.
func (r *ClaimReconciler) holderGone(ctx context.Context, claim *v1.HostClaim) (bool, error) {
	key := client.ObjectKey{Namespace: claim.Spec.Namespace, Name: claim.Spec.Name}
	holder := &v1.Instance{}
	if err := r.Client.Get(ctx, key, holder); err == nil && holder.UID == claim.Spec.UID {
		return false, nil
	}
	err := r.Reader.Get(ctx, key, holder)
	switch {
	case err == nil:
		return holder.UID != claim.Spec.UID, nil
	case apierrors.IsNotFound(err):
		return true, nil
	}
	return false, fmt.Errorf("read the holder of host %s: %w", claim.Name, err)
}

// SetupWithManager watches HostClaims; a holder's deletion reaches its
// claim through the Instance watch.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	held := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1.HostClaimList
		if err := r.Client.List(ctx, &list, client.MatchingLabels{v1.LabelHolderUID: string(o.GetUID())}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("hostclaims").
		For(&v1.HostClaim{}).
		Watches(&v1.Instance{}, held, builder.WithPredicates(watchfilter.OnlyDeletes)).
		Complete(r)
}
