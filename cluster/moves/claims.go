package moves

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/watchfilter"
)

// ClaimReconciler keeps each HostClaim on its holder's node, and deletes
// it once the holder is gone. An agent watches only its own node's claims
// and may create or delete only those (config/policy): when a holder
// moves, its claim's node follows it here, so the new node's agent finds
// it in its cache. A claim whose node is lost, or whose holder is deleted
// and its finalizer let go (every generation proven gone), is given back
// here: nothing serves the host any more.
type ClaimReconciler struct {
	// Client reads claims and, first, their holders from the cache.
	Client client.Client
	// Reader reads a holder the cache does not show from the API server:
	// a cache behind an Instance just made must not make it look gone.
	Reader client.Reader
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=hostclaims,verbs=get;list;watch;patch;delete

// ClaimAction is what DecideClaim asks for one claim.
type ClaimAction string

const (
	// ClaimKeep: the holder lives on the claim's node; nothing to do.
	ClaimKeep ClaimAction = "Keep"
	// ClaimFollow: the holder lives on another node; the claim's node is
	// set to it.
	ClaimFollow ClaimAction = "Follow"
	// ClaimRelease: the holder is gone; the claim is deleted.
	ClaimRelease ClaimAction = "Release"
)

// DecideClaim is what to do with claim given its holder (nil: gone, or
// re-created with another UID). A holder not yet placed keeps the claim
// where it is.
func DecideClaim(claim *v1.HostClaim, holder *v1.Instance) ClaimAction {
	switch {
	case holder == nil || holder.UID != claim.Spec.UID:
		return ClaimRelease
	case holder.Spec.NodeName != "" && holder.Spec.NodeName != claim.Spec.NodeName:
		return ClaimFollow
	}
	return ClaimKeep
}

// Reconcile applies DecideClaim to one claim.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &v1.HostClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	holder, err := r.holder(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("host", claim.Name, "holderNamespace", claim.Spec.Namespace,
		"holderName", claim.Spec.Name, "node", claim.Spec.NodeName)
	switch DecideClaim(claim, holder) {
	case ClaimRelease:
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("release host %s: %w", claim.Name, err)
		}
		log.Info("host released: its holder is gone")
	case ClaimFollow:
		// Only the node changes (the holder is immutable): a plain merge
		// patch cannot undo another writer's change to anything else.
		patch := client.MergeFrom(claim.DeepCopy())
		claim.Spec.NodeName = holder.Spec.NodeName
		if err := r.Client.Patch(ctx, claim, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("move the claim of host %s to node %s: %w", claim.Name, holder.Spec.NodeName, err)
		}
		log.Info("host claim follows its holder to its node", "to", holder.Spec.NodeName)
	}
	return ctrl.Result{}, nil
}

// holder is claim's holder, nil when it is gone (deleted, or re-created
// with another UID). A holder the cache shows is taken as there without
// asking the API server (every claim made in a mass create would cost a
// read): if it has gone or moved since, that event brings the claim back
// here. Only a holder the cache does not show is read from the API
// server before its claim is released.
func (r *ClaimReconciler) holder(ctx context.Context, claim *v1.HostClaim) (*v1.Instance, error) {
	key := client.ObjectKey{Namespace: claim.Spec.Namespace, Name: claim.Spec.Name}
	holder := &v1.Instance{}
	if err := r.Client.Get(ctx, key, holder); err == nil && holder.UID == claim.Spec.UID {
		return holder, nil
	}
	err := r.Reader.Get(ctx, key, holder)
	switch {
	case err == nil && holder.UID == claim.Spec.UID:
		return holder, nil
	case err == nil, apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("read the holder of host %s: %w", claim.Name, err)
}

// SetupWithManager watches HostClaims; a holder's deletion or move
// reaches its claims through the Instance watch.
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
		Watches(&v1.Instance{}, held, builder.WithPredicates(holderEvents)).
		Complete(r)
}

// holderEvents are the Instance events a claim acts on: its holder gone
// (release) or moved (follow).
var holderEvents = predicate.Or[client.Object](watchfilter.OnlyDeletes, nodeChanged)

// nodeChanged passes an Instance's updates that change its spec.nodeName:
// a move, which its claims follow.
var nodeChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*v1.Instance)
		n, okNew := e.ObjectNew.(*v1.Instance)
		return okOld && okNew && o.Spec.NodeName != n.Spec.NodeName
	},
}
