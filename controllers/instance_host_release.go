package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// formerClaims are the claims among claims that inst holds from node for
// a host other than its spec.host: what a host change left behind. A
// claim made from another node (before a move) is that node's agent's or
// the cluster side's to release (config/policy).
func formerClaims(claims []v1.HostClaim, inst *v1.Instance, node string) []*v1.HostClaim {
	var out []*v1.HostClaim
	for i := range claims {
		c := &claims[i]
		if c.Spec.UID == inst.UID && c.Name != inst.Spec.Host && c.Spec.NodeName == node {
			out = append(out, c)
		}
	}
	return out
}

// releasable are the former claims no generation serves any more: every
// generation made for that host (or before hosts were frozen, whose host
// is not known) is proven gone.
func releasable(former []*v1.HostClaim, gens []*v1.Generation) []*v1.HostClaim {
	var out []*v1.HostClaim
	for _, c := range former {
		served := false
		for _, g := range gens {
			served = served || ((g.Spec.Host == c.Name || g.Spec.Host == "") && !terminated(g))
		}
		if !served {
			out = append(out, c)
		}
	}
	return out
}

// releaseFormerHosts gives back the hosts a host change left once nothing
// serves them. The generations are read from the API server: one just made
// for the former host may not be in the cache yet.
func (r *InstanceReconciler) releaseFormerHosts(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	var list v1.HostClaimList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{v1.LabelHolderUID: string(s.inst.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the instance's host claims: %w", err)
	}
	former := formerClaims(list.Items, s.inst, r.NodeName)
	if len(former) == 0 {
		return ctrl.Result{}, nil
	}
	gens, err := listGenerations(ctx, r.Reader, s.inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, c := range releasable(former, gens) {
		if err := r.releaseClaim(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("former host released", "host", c.Name)
	}
	return ctrl.Result{}, nil
}

// indexInstanceHost indexes the cached Instances by spec.host, so a
// claim's event finds its claimants without copying every Instance: on a
// node of N, a mass create or reboot makes N claim events.
const indexInstanceHost = "spec.host"

// indexHost registers indexInstanceHost with the manager's cache.
func indexHost(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1.Instance{}, indexInstanceHost, instanceHost)
}

// instanceHost is an Instance's key in indexInstanceHost.
func instanceHost(o client.Object) []string {
	if i, ok := o.(*v1.Instance); ok && i.Spec.Host != "" {
		return []string{i.Spec.Host}
	}
	return nil
}

// claimants are the node's Instances that name claim's host: a claim of
// this node deleted wakes those waiting for it (one of another node is
// looked at again every hostRecheck).
func (r *InstanceReconciler) claimants(ctx context.Context, claim client.Object) []reconcile.Request {
	return r.onHost(ctx, claim.GetName())
}

// heirs are the node's Instances that name a deleted Instance's host: it
// leaves its claim behind (see finalize), and one of them may take it
// over now that its holder is gone.
func (r *InstanceReconciler) heirs(ctx context.Context, o client.Object) []reconcile.Request {
	inst, ok := o.(*v1.Instance)
	if !ok || inst.Spec.Host == "" {
		return nil
	}
	return r.onHost(ctx, inst.Spec.Host)
}

// onHost are the node's Instances whose spec.host is host.
func (r *InstanceReconciler) onHost(ctx context.Context, host string) []reconcile.Request {
	var list v1.InstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{indexInstanceHost: host}); err != nil {
		ctrl.LoggerFrom(ctx).Info("host claim changed; the node's instances cannot be listed", "host", host, "error", err.Error())
		return nil
	}
	var out []reconcile.Request
	for _, i := range list.Items {
		if i.Spec.NodeName == r.NodeName {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&i)})
		}
	}
	return out
}
