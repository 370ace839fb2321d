package plugin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// moveState is where one Instance stands in a drain of a node.
type moveState int

const (
	// stateStays: moves Never, it stays on the node.
	stateStays moveState = iota
	// stateDeleting: it is being deleted; the drain waits for it.
	stateDeleting
	// stateAsk: moves Allowed, bound to the node, no move asked yet.
	stateAsk
	// stateAsked: the move is asked; the placement controller has not
	// chosen another node yet.
	stateAsked
	// stateMoving: bound to another node, still served on this one.
	stateMoving
	// stateRetiring: served on another node; a Generation of it on this
	// node is not proven gone yet.
	stateRetiring
	// stateMoved: nothing of it is left on the node.
	stateMoved
)

// instanceView is one Instance as a drain of a node sees it.
type instanceView struct {
	key   string // namespace/name
	state moveState
	// to is the node it is bound to, when not the drained one.
	to string
	// live are the numbers of its Generations on the node not proven
	// gone (Terminated is not True).
	live []int64
	// why is the placement controller's word when it did not bind it
	// (Scheduled=False), for a move that waits.
	why string
}

// assess is every Instance of insts that has anything on node (bound
// there, served there, or a Generation there not proven gone) or whose
// key is in seen (so one moved off reads as moved), sorted by key, with
// where its move stands; gens are the Generations on node.
func assess(node string, insts []v1.Instance, gens []v1.Generation, seen map[string]string) []instanceView {
	live := liveGenerations(node, gens)
	var out []instanceView
	for i := range insts {
		in := &insts[i]
		key := in.Namespace + "/" + in.Name
		_, tracked := seen[key]
		if !tracked && in.Spec.NodeName != node && in.Status.NodeName != node && len(live[key]) == 0 {
			continue
		}
		out = append(out, instanceView{key: key, state: stateOf(node, in, live[key]), to: otherNode(node, in), live: live[key], why: unscheduled(in)})
	}
	slices.SortFunc(out, func(a, b instanceView) int { return strings.Compare(a.key, b.key) })
	return out
}

// stateOf is where in's move off node stands; live are its Generations
// on node not proven gone.
func stateOf(node string, in *v1.Instance, live []int64) moveState {
	switch {
	case in.DeletionTimestamp != nil:
		return stateDeleting
	case in.Spec.NodeName == node && !in.Spec.MovesAllowed():
		return stateStays
	case in.Spec.NodeName == node && in.Annotations[v1.AnnotationMoveFrom] != node:
		return stateAsk
	case in.Spec.NodeName == node:
		return stateAsked
	case in.Status.NodeName == node:
		return stateMoving
	case len(live) > 0:
		return stateRetiring
	}
	return stateMoved
}

// otherNode is the node in is bound to, or "" when that is node.
func otherNode(node string, in *v1.Instance) string {
	if in.Spec.NodeName == node {
		return ""
	}
	return in.Spec.NodeName
}

// unscheduled is the Scheduled=False condition's reason and message, or "".
func unscheduled(in *v1.Instance) string {
	c := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionScheduled)
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	return c.Reason + ": " + c.Message
}

// liveGenerations is, by namespace/instance, the numbers of the
// Generations on node whose Terminated condition is not True, ascending.
func liveGenerations(node string, gens []v1.Generation) map[string][]int64 {
	out := map[string][]int64{}
	for i := range gens {
		g := &gens[i]
		if g.Spec.NodeName != node || meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			continue
		}
		key := g.Namespace + "/" + g.Spec.Instance
		out[key] = append(out[key], g.Spec.Number)
	}
	for _, n := range out {
		slices.Sort(n)
	}
	return out
}

// progressLine is what a drain of node prints about v.
func progressLine(node string, v instanceView) string {
	name := "instance/" + v.key
	switch v.state {
	case stateStays:
		return fmt.Sprintf("%s stays: moves: Never: its data dir lives on %s", name, node)
	case stateDeleting:
		return name + " is being deleted"
	case stateAsk:
		return name + " move not asked yet"
	case stateAsked:
		if v.why != "" {
			return fmt.Sprintf("%s waiting for a node: %s", name, v.why)
		}
		return name + " waiting for a node"
	case stateMoving:
		return fmt.Sprintf("%s moving to %s", name, v.to)
	case stateRetiring:
		return fmt.Sprintf("%s serving on %s, stopping %s on %s", name, v.to, generations(v.live), node)
	}
	return fmt.Sprintf("%s moved to %s", name, v.to)
}

// generations names generation numbers: "generation 3", "generations 2, 3".
func generations(n []int64) string {
	s := make([]string, len(n))
	for i, x := range n {
		s[i] = strconv.FormatInt(x, 10)
	}
	if len(n) == 1 {
		return "generation " + s[0]
	}
	return "generations " + strings.Join(s, ", ")
}

// newLines is the progress lines of views that differ from the last
// printed for the same Instance (seen, updated), and a line for each
// Instance of seen no longer there: deleted (then forgotten).
func newLines(node string, seen map[string]string, views []instanceView) []string {
	var out []string
	here := map[string]bool{}
	for _, v := range views {
		here[v.key] = true
		if l := progressLine(node, v); seen[v.key] != l {
			seen[v.key] = l
			out = append(out, l)
		}
	}
	var gone []string
	for key := range seen {
		if !here[key] {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	for _, key := range gone {
		delete(seen, key)
		out = append(out, "instance/"+key+" deleted")
	}
	return out
}

// outcome splits views into the Instances the drain still waits for
// (pending) and those that stay on the node (moves Never).
func outcome(views []instanceView) (pending, stays []instanceView) {
	for _, v := range views {
		switch v.state {
		case stateMoved:
		case stateStays:
			stays = append(stays, v)
		default:
			pending = append(pending, v)
		}
	}
	return pending, stays
}

// keys is "instance/KEY" of each view, comma-separated.
func keys(views []instanceView) string {
	s := make([]string, len(views))
	for i, v := range views {
		s[i] = "instance/" + v.key
	}
	return strings.Join(s, ", ")
}
