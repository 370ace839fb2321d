package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// elsewhereRecheck is how often an Instance being deleted looks again for
// its generations on other nodes: their changes do not reach this node's
// cache.
const elsewhereRecheck = 2 * time.Second

// lookElsewhere reads, from the API server, the numbers of the Instance's
// generations on other nodes when it has any: when its serving generation
// is another node's (a move here is under way) or is newer than any
// here. A move continues the numbering, and the cache of this node holds
// only its own Generations.
func (r *InstanceReconciler) lookElsewhere(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	var newest int64
	if l := s.latest(); l != nil {
		newest = l.Spec.Number
	}
	if !s.servesElsewhere() && s.inst.Status.ActiveGeneration <= newest {
		return ctrl.Result{}, nil
	}
	all, err := listGenerations(ctx, r.Reader, s.inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.elsewhere = highestElsewhere(all, r.NodeName)
	for _, g := range all {
		if g.Spec.NodeName != r.NodeName && g.Spec.Number == s.inst.Status.ActiveGeneration {
			s.servingThere = g
		}
	}
	return ctrl.Result{}, nil
}

// statusGenerations are the generations the Instance's status is computed
// from: gens, this node's, and during a move the one still serving on the
// old node (status says it serves, not that nothing does).
func (s *instanceScope) statusGenerations(gens []*v1.Generation) []*v1.Generation {
	if s.servingThere == nil {
		return gens
	}
	out := make([]*v1.Generation, 0, len(gens)+1)
	out = append(out, s.servingThere)
	return append(out, gens...) // older than any made here
}

// highestElsewhere is the highest number among gens of nodes other than
// node (0: none).
func highestElsewhere(gens []*v1.Generation, node string) int64 {
	var n int64
	for _, g := range gens {
		if g.Spec.NodeName != node && g.Spec.Number > n {
			n = g.Spec.Number
		}
	}
	return n
}

// awaitGenerationsElsewhere holds a deleted Instance's finalizer while it
// has Generations on other nodes (a move's old node): the cluster side
// deletes them there, and their node's agent lets each go once proven
// gone.
func (s *instanceScope) awaitGenerationsElsewhere(ctx context.Context) (ctrl.Result, error) {
	all, err := listGenerations(ctx, s.r.Reader, s.inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	left := 0
	for _, g := range all {
		if g.Spec.NodeName != s.r.NodeName {
			left++
		}
	}
	if left == 0 {
		return ctrl.Result{}, nil
	}
	s.progress(v1.ReasonDeleting, "waiting for %d generations on other nodes to be proven gone before the lease is released", left)
	return ctrl.Result{RequeueAfter: elsewhereRecheck}, nil
}

// servingHere records, where the serving generation is this node's, that
// it is: an Instance served since before status.nodeName existed gets it
// without waiting for a promotion.
func (s *instanceScope) servingHere() {
	if s.number(s.inst.Status.ActiveGeneration) != nil && s.inst.Status.NodeName == "" {
		s.inst.Status.NodeName = s.r.NodeName
	}
}
