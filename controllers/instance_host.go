package controllers

import (
	"context"
	"fmt"
	"time"

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

// hostConflict reads the node's Instances (the agent's cache holds only
// its node's) and notes a conflict on s when another holds the host.
func (s *swap) hostConflict(ctx context.Context) (bool, error) {
	var list v1.InstanceList
	if err := s.r.Client.List(ctx, &list); err != nil {
		return false, fmt.Errorf("list the node's instances: %w", err)
	}
	h := hostHolder(s.inst, list.Items)
	if h == nil {
		return false, nil
	}
	s.note = note{reason: v1.ReasonHostInUse, stalled: true, msg: fmt.Sprintf(
		"host %s is served on node %s by %s/%s, created first: nothing starts until spec.host changes or that Instance goes",
		s.inst.Spec.Host, s.inst.Spec.NodeName, h.Namespace, h.Name)}
	return true, nil
}
