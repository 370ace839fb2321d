package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// hostRecheck is how often an Instance whose host another one holds looks
// again; the deletion of a claim of its node wakes it sooner (the
// HostClaim watch sees only this node's claims).
const hostRecheck = 30 * time.Second

// claimState is who holds an Instance's spec.host, as decideClaim reads it.
type claimState string

const (
	// claimMine: the Instance holds the host's HostClaim.
	claimMine claimState = "Mine"
	// claimFree: no claim exists; the Instance creates one.
	claimFree claimState = "Free"
	// claimTaken: another Instance holds it; nothing of the host starts.
	claimTaken claimState = "Taken"
	// claimStale: the claim's holder no longer exists; the Instance
	// deletes the claim (only that object, by its UID) and creates its own.
	claimStale claimState = "Stale"
)

// decideClaim is who holds inst's host: claim is the host's HostClaim (nil:
// none), holderGone whether the Instance it names is gone (not found, or
// re-created with another UID), read only for another holder on inst's
// node. A claim of another node reads as taken whatever its holder: only
// that node's agent may delete it (config/policy), and an Instance being
// deleted keeps its claim until its finalizer goes.
func decideClaim(inst *v1.Instance, claim *v1.HostClaim, holderGone bool) claimState {
	switch {
	case claim == nil:
		return claimFree
	case claim.Spec.UID == inst.UID:
		return claimMine
	case claim.Spec.NodeName == inst.Spec.NodeName && holderGone:
		return claimStale
	}
	return claimTaken
}

// claimHost holds spec.host's claim before anything of that host is
// made; held by another, the reconcile stops here, and a generation that
// serves a former host keeps serving it.
func (r *InstanceReconciler) claimHost(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	claim, err := getClaim(ctx, r.Client, s.inst.Spec.Host)
	if err != nil {
		return s.stop(ctrl.Result{}, err)
	}
	state, err := r.claimState(ctx, s.inst, claim)
	if err != nil {
		return s.stop(ctrl.Result{}, err)
	}
	if state == claimStale {
		ctrl.LoggerFrom(ctx).Info("taking over a host whose holder is gone", "host", claim.Name,
			"holderNamespace", claim.Spec.Namespace, "holderName", claim.Spec.Name, "holderUID", claim.Spec.UID)
		if err := r.releaseClaim(ctx, claim); err != nil {
			return s.stop(ctrl.Result{}, err)
		}
	}
	if state == claimFree || state == claimStale {
		if state, err = r.createClaim(ctx, s.inst); err != nil {
			return s.stop(ctrl.Result{}, err)
		}
	}
	if state == claimMine {
		return ctrl.Result{}, nil
	}
	s.note = note{reason: v1.ReasonHostInUse, stalled: true, msg: hostInUseMessage(s.inst.Spec.Host, s.number(s.inst.Status.ActiveGeneration))}
	return s.stop(ctrl.Result{RequeueAfter: hostRecheck}, nil)
}

// hostInUseMessage names neither the holder's namespace nor its Instance:
// an Instance's owner learns only that the host is taken. An administrator
// reads the holder from the HostClaim, named after the host.
func hostInUseMessage(host string, serving *v1.Generation) string {
	msg := fmt.Sprintf("host %s is held by another Instance: nothing of it starts until that one releases it or spec.host changes", host)
	if serving != nil && serving.Spec.Host != "" && serving.Spec.Host != host {
		msg += fmt.Sprintf("; generation %d keeps serving host %s", serving.Spec.Number, serving.Spec.Host)
	}
	return msg
}

// claimState reads what decideClaim needs beyond the claim: whether
// another holder on inst's node still exists, asked of the API server (a
// cache that has not caught up must not make a live holder look gone).
func (r *InstanceReconciler) claimState(ctx context.Context, inst *v1.Instance, claim *v1.HostClaim) (claimState, error) {
	gone := false
	if claim != nil && claim.Spec.UID != inst.UID && claim.Spec.NodeName == inst.Spec.NodeName {
		holder := &v1.Instance{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: claim.Spec.Namespace, Name: claim.Spec.Name}, holder)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("read the holder of host %s: %w", claim.Name, err)
		}
		gone = apierrors.IsNotFound(err) || holder.UID != claim.Spec.UID
	}
	return decideClaim(inst, claim, gone), nil
}

// createClaim creates inst's claim of its host. The API server refuses a
// second one (AlreadyExists): the claim is then read from the API server,
// which says whether it is inst's own (a cache behind a claim made
// earlier, or one made on another node before a move that the cluster
// side has not yet moved here) or another's. The cache holds only this
// node's claims (NodeCache), so a host held on another node is found
// here, once per hostRecheck while the Instance waits.
func (r *InstanceReconciler) createClaim(ctx context.Context, inst *v1.Instance) (claimState, error) {
	claim := &v1.HostClaim{}
	claim.Name = inst.Spec.Host
	claim.Labels = map[string]string{v1.LabelHolderUID: string(inst.UID)}
	claim.Spec = v1.HostClaimSpec{Namespace: inst.Namespace, Name: inst.Name, UID: inst.UID, NodeName: inst.Spec.NodeName}
	err := r.Client.Create(ctx, claim)
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("host claimed", "host", claim.Name)
		return claimMine, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("claim host %s: %w", claim.Name, err)
	}
	held, err := getClaim(ctx, r.Reader, inst.Spec.Host)
	if err != nil {
		return "", err
	}
	if held != nil && held.Spec.UID == inst.UID {
		return claimMine, nil
	}
	return claimTaken, nil // deleted meanwhile: the next look claims it
}

// releaseClaim deletes claim, that object only: the precondition on its
// UID leaves alone a claim another Instance made after this one went.
func (r *InstanceReconciler) releaseClaim(ctx context.Context, claim *v1.HostClaim) error {
	err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("release host %s: %w", claim.Name, err)
}

// getClaim reads host's claim; nil when there is none.
func getClaim(ctx context.Context, c client.Reader, host string) (*v1.HostClaim, error) {
	claim := &v1.HostClaim{}
	if err := c.Get(ctx, client.ObjectKey{Name: host}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the claim of host %s: %w", host, err)
	}
	return claim, nil
}
