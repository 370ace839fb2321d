package controllers

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// hostRecheck is how often an Instance whose host another one holds looks
// again: the holder's deletion does not wake it.
const hostRecheck = 30 * time.Second

// hostHolder is the Instance among others (a node's Instances) that holds
// inst's spec.host, or nil when inst holds it: the one created first, then
// by namespace and name, of those not being deleted. A front end routes a
// host to one socket, so two Instances on a node cannot share one.
func hostHolder(inst *v1.Instance, others []v1.Instance) *v1.Instance {
	var holder *v1.Instance
	for i := range others {
		o := &others[i]
		if o.Spec.Host != inst.Spec.Host || !o.DeletionTimestamp.IsZero() || o.Spec.NodeName != inst.Spec.NodeName {
			continue
		}
		if holder == nil || before(o, holder) {
			holder = o
		}
	}
	if holder == nil || (holder.Namespace == inst.Namespace && holder.Name == inst.Name) {
		return nil
	}
	return holder
}

func before(a, b *v1.Instance) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// checkHost reads the node's Instances (the agent's cache holds only its
// node's) and stops the reconcile when another holds the host. Only before
// the first generation: one already running keeps running, and a host
// edit is the owner's to undo.
func (s *swap) checkHost(ctx context.Context) (ctrl.Result, error) {
	if len(s.gens) > 0 {
		return ctrl.Result{}, nil
	}
	var list v1.InstanceList
	if err := s.r.Client.List(ctx, &list); err != nil {
		return s.stop(ctrl.Result{RequeueAfter: hostRecheck}, fmt.Errorf("list the node's instances: %w", err))
	}
	h := hostHolder(s.inst, list.Items)
	if h == nil {
		return ctrl.Result{}, nil
	}
	s.note = note{reason: v1.ReasonHostInUse, stalled: true, msg: fmt.Sprintf(
		"host %s is served on node %s by %s/%s, created first: nothing starts until spec.host changes or that Instance goes",
		s.inst.Spec.Host, s.inst.Spec.NodeName, h.Namespace, h.Name)}
	return s.stop(ctrl.Result{RequeueAfter: hostRecheck}, nil)
}
