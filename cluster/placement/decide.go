// Package placement chooses the node an Instance runs on, as the
// kube-scheduler chooses a pod's: Decide filters the enrolled nodes (those
// that may host it, whose labels match its node selector, where its tier
// fits beside what is bound there) and scores the rest (least allocated,
// then spread of an owner's Instances), from facts alone. The Reconciler
// gathers the facts and writes the binding.
package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// DefaultSpreadLabel is the Instance label whose value groups an owner's
// Instances for spreading (the --spread-label flag's default).
const DefaultSpreadLabel = "app"

// resources are what a tier limits and a node's allocatable counts, in
// the order a shortage is reported.
var resources = []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU, v1.ResourcePids}

// Request is an Instance asking for a node.
type Request struct {
	// Namespace and Spread (the value of the spread label, "" when the
	// Instance has none) group it with its owner's other Instances.
	Namespace, Spread string
	// Demand is the tier: memory, cpu, pids.
	Demand corev1.ResourceList
	// NodeSelector must match the Enrollment's labels.
	NodeSelector map[string]string
	// Exclude is a node not to choose: a move's source.
	Exclude string
}

// Node is one enrolled node as placement sees it.
type Node struct {
	Enrollment *v1.Enrollment
	// Lost: its agent's Lease ran out (nodewatch's NodeLost).
	Lost bool
	// Bound is what is bound to the node: Instances whose spec.nodeName
	// (or, during a move, status.nodeName) names it.
	Bound []Bound
}

// Bound is one Instance bound to a node.
type Bound struct {
	Namespace, Spread string
	Demand            Amounts
}

// Amounts are memory, cpu and pids (resources' order) in thousandths,
// exact for bytes, millicores and pids: summed for every decision, so
// kept as integers rather than Quantities.
type Amounts [3]int64

// AmountsOf reads memory, cpu and pids of l (a missing one is 0).
func AmountsOf(l corev1.ResourceList) Amounts {
	var a Amounts
	for i, r := range resources {
		if q, ok := l[r]; ok {
			a[i] = q.MilliValue()
		}
	}
	return a
}

// Score is a feasible node's score: higher is better.
type Score struct {
	Node string
	// LeastAllocated is kube-scheduler's NodeResourcesFit LeastAllocated
	// (0-100): the mean over memory, cpu and pids of the share left free
	// once the Instance is placed.
	LeastAllocated int64
	// Spread is 0-100: 100 on the nodes with the fewest of the owner's
	// Instances, 0 on those with the most.
	Spread int64
}

// Total is the score nodes are ranked by.
func (s Score) Total() int64 { return s.LeastAllocated + s.Spread }

// Decision is where an Instance goes.
type Decision struct {
	// Node is the chosen node; empty when none fits.
	Node string
	// Message says why no node fits, as the kube-scheduler's does.
	Message string
	// Scores are the feasible nodes', best first.
	Scores []Score
}

// Decide filters and scores nodes for req. Ties go to the node whose name
// sorts first, so the same facts always give the same node.
func Decide(req Request, nodes []Node) Decision {
	failed := map[string]int{}
	var feasible []Node
	for _, n := range nodes {
		reasons := filter(req, n)
		if len(reasons) == 0 {
			feasible = append(feasible, n)
		}
		for _, r := range reasons {
			failed[r]++
		}
	}
	if len(feasible) == 0 {
		return Decision{Message: unavailable(len(nodes), failed)}
	}
	scores := score(req, feasible)
	return Decision{Node: scores[0].Node, Scores: scores}
}

// Filter reasons, singular and plural, in the order they are checked and
// reported.
var reasonText = []struct{ key, one, many string }{
	{"source", "node is the one it moves from", "nodes are the one it moves from"},
	{"unapproved", "node is not approved", "nodes are not approved"},
	{"joining", "node is not hosting", "nodes are not hosting"},
	{"cordoned", "node is cordoned", "nodes are cordoned"},
	{"lost", "node is lost", "nodes are lost"},
	{"selector", "node didn't match the node selector", "nodes didn't match the node selector"},
	{"unreported", "node has not reported its allocatable", "nodes have not reported their allocatable"},
	{"insufficient-" + string(corev1.ResourceMemory), "node has insufficient memory", "nodes have insufficient memory"},
	{"insufficient-" + string(corev1.ResourceCPU), "node has insufficient cpu", "nodes have insufficient cpu"},
	{"insufficient-" + string(v1.ResourcePids), "node has insufficient pids", "nodes have insufficient pids"},
}

// filter is why n cannot take req: the first failing check, or every
// resource short (a node short of memory and cpu counts under both, as
// in the kube-scheduler's message).
func filter(req Request, n Node) []string {
	e := n.Enrollment
	switch {
	case e.Name == req.Exclude:
		return []string{"source"}
	case !e.Spec.Approved:
		return []string{"unapproved"}
	case e.Status.Mode != v1.ModeHosting:
		return []string{"joining"}
	case e.Spec.Unschedulable:
		return []string{"cordoned"}
	case n.Lost:
		return []string{"lost"}
	case !labels.SelectorFromSet(req.NodeSelector).Matches(labels.Set(e.Labels)):
		return []string{"selector"}
	case len(e.Status.Allocatable) == 0:
		return []string{"unreported"}
	}
	used, demand, alloc := Used(n), AmountsOf(req.Demand), AmountsOf(e.Status.Allocatable)
	var short []string
	for i, r := range resources {
		if used[i]+demand[i] > alloc[i] {
			short = append(short, "insufficient-"+string(r))
		}
	}
	return short
}

// Used is what is taken on n: the sum of what is bound there, and never
// less than what its agent reports allocated (a generation the cluster
// does not count, as an Overlap swap's second one).
func Used(n Node) Amounts {
	var used Amounts
	for _, b := range n.Bound {
		for i := range used {
			used[i] += b.Demand[i]
		}
	}
	reported := AmountsOf(n.Enrollment.Status.Allocated)
	for i := range used {
		used[i] = max(used[i], reported[i])
	}
	return used
}

// unavailable is the kube-scheduler's message: "0/4 nodes are available:
// 1 node is cordoned, 2 nodes have insufficient memory."
func unavailable(total int, failed map[string]int) string {
	if total == 0 {
		return "0/0 nodes are available: no node is enrolled."
	}
	var parts []string
	for _, t := range reasonText {
		switch n := failed[t.key]; {
		case n == 1:
			parts = append(parts, "1 "+t.one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, t.many))
		}
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(parts, ", "))
}

// score ranks the feasible nodes, best first.
func score(req Request, nodes []Node) []Score {
	counts := make([]int64, len(nodes))
	var most int64
	for i, n := range nodes {
		if req.Spread == "" {
			continue
		}
		for _, b := range n.Bound {
			if b.Namespace == req.Namespace && b.Spread == req.Spread {
				counts[i]++
			}
		}
		most = max(most, counts[i])
	}
	scores := make([]Score, len(nodes))
	for i, n := range nodes {
		s := Score{Node: n.Enrollment.Name, LeastAllocated: leastAllocated(req, n), Spread: 100}
		if most > 0 {
			s.Spread = 100 * (most - counts[i]) / most
		}
		scores[i] = s
	}
	slices.SortFunc(scores, func(a, b Score) int {
		if c := cmp.Compare(b.Total(), a.Total()); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	return scores
}

// leastAllocated is NodeResourcesFit's LeastAllocated with weight 1 for
// each of memory, cpu and pids: (allocatable - used - demand) * 100 /
// allocatable, averaged.
func leastAllocated(req Request, n Node) int64 {
	used, demand, alloc := Used(n), AmountsOf(req.Demand), AmountsOf(n.Enrollment.Status.Allocatable)
	var sum int64
	for i := range resources {
		if alloc[i] <= 0 {
			continue
		}
		free := alloc[i] - used[i] - demand[i]
		sum += max(free, 0) * 100 / alloc[i]
	}
	return sum / int64(len(resources))
}
