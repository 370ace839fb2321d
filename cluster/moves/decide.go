// Package moves finishes an Instance's move between nodes on the cluster
// side. The node it moves to starts its next generation and promotes it
// as any swap does (status.nodeName and status.socket become its own);
// no agent may write another node's Generations (config/policy), so the
// old node's generations are retired, or deleted with their Instance,
// from here, and their own agent drains them with the proven drain and
// stops them. It also gives back the host claims of Instances that are
// gone, which only the claim's node could otherwise release.
package moves

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Plan is what the cluster side does now to an Instance's generations on
// nodes other than its spec.nodeName.
type Plan struct {
	// Retire are to be marked retired (spec.retired); Delete deleted
	// (the Instance is being deleted).
	Retire, Delete []*v1.Generation
	// Wait is how long until the front ends have had their settle after
	// the promotion: look again then (0: nothing to wait for).
	Wait time.Duration
}

// Facts are what Decide reads.
type Facts struct {
	Instance *v1.Instance
	Gens     []*v1.Generation
	// ServingSince is when the serving generation on the target node was
	// first seen serving (zero: not yet).
	ServingSince, Now time.Time
	// Settle is how long after the promotion a front end that follows
	// status is given to follow it before the old node drains.
	Settle time.Duration
}

// Decide is the cluster's part of a move as a pure function: an Instance
// being deleted has its other nodes' generations deleted; a suspended
// one, retired; a moved one, retired once the target node's generation
// serves and the settle has passed. While the move is under way (the
// target does not serve yet) the old node keeps serving: nothing is done.
func Decide(f Facts) Plan {
	inst := f.Instance
	target := inst.Spec.NodeName
	var p Plan
	if target == "" {
		return p
	}
	var others []*v1.Generation
	for _, g := range f.Gens {
		if g.Spec.NodeName != target && !terminated(g) {
			others = append(others, g)
		}
	}
	switch {
	case !inst.DeletionTimestamp.IsZero():
		for _, g := range f.Gens {
			if g.Spec.NodeName != target && g.DeletionTimestamp.IsZero() {
				p.Delete = append(p.Delete, g)
			}
		}
	case inst.Spec.Suspend:
		p.Retire = notRetired(others)
	case ServesOn(inst, f.Gens, target):
		left := notRetired(others)
		if len(left) == 0 {
			return p
		}
		since := f.ServingSince
		if since.IsZero() {
			since = f.Now // first seen serving now
		}
		if wait := f.Settle - f.Now.Sub(since); wait > 0 {
			p.Wait = wait
			return p
		}
		p.Retire = left
	}
	return p
}

// ServesOn: inst's serving generation is node's, as its status says.
func ServesOn(inst *v1.Instance, gens []*v1.Generation, node string) bool {
	if inst.Status.NodeName != node || inst.Status.ActiveGeneration == 0 {
		return false
	}
	for _, g := range gens {
		if g.Spec.Number == inst.Status.ActiveGeneration {
			return g.Spec.NodeName == node
		}
	}
	return false
}

func notRetired(gens []*v1.Generation) []*v1.Generation {
	var out []*v1.Generation
	for _, g := range gens {
		if !g.Spec.Retired {
			out = append(out, g)
		}
	}
	return out
}

func terminated(g *v1.Generation) bool {
	return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated)
}
