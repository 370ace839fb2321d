package placement

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Ledger is the placement controller's assume cache, as the
// kube-scheduler's: a binding it wrote counts on its node at once,
// before the informer's cache shows it, so the next decision does not
// place another Instance into the same room.
type Ledger struct {
	mu sync.Mutex
	// assumed: Instance UID -> the node it was bound (or moved) to.
	assumed map[types.UID]string
}

// Assume records that uid was bound to node.
func (l *Ledger) Assume(uid types.UID, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.assumed == nil {
		l.assumed = map[types.UID]string{}
	}
	l.assumed[uid] = node
}

// Assumed is how many bindings are not yet seen in the cache.
func (l *Ledger) Assumed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.assumed)
}

// BoundByNode counts insts (the cache's Instances) on their nodes: on
// spec.nodeName, and on status.nodeName too while a move lasts (the old
// node's generation runs until the new one serves); an assumed binding
// stands for spec.nodeName until the cache shows it, then is forgotten,
// as is the assumption of an Instance the cache no longer holds.
func (l *Ledger) BoundByNode(insts []v1.Instance, spreadLabel string) map[string][]Bound {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]Bound{}
	seen := make(map[types.UID]bool, len(l.assumed))
	for i := range insts {
		inst := &insts[i]
		node := inst.Spec.NodeName
		if a, ok := l.assumed[inst.UID]; ok {
			seen[inst.UID] = true
			if node == a {
				delete(l.assumed, inst.UID)
			}
			node = a
		}
		b := Bound{Namespace: inst.Namespace, Spread: inst.Labels[spreadLabel], Demand: demandOf(inst)}
		if node != "" {
			out[node] = append(out[node], b)
		}
		if s := inst.Status.NodeName; s != "" && s != node {
			out[s] = append(out[s], b)
		}
	}
	for uid := range l.assumed {
		if !seen[uid] {
			delete(l.assumed, uid)
		}
	}
	return out
}

// Demand is what inst's tier takes on its node.
func Demand(inst *v1.Instance) corev1.ResourceList {
	t := inst.Spec.Template.Tier
	return corev1.ResourceList{
		corev1.ResourceMemory: t.Memory,
		corev1.ResourceCPU:    t.CPU,
		v1.ResourcePids:       *resource.NewQuantity(t.Pids, resource.DecimalSI),
	}
}

// demandOf is Demand as Amounts, without building the list.
func demandOf(inst *v1.Instance) Amounts {
	t := inst.Spec.Template.Tier
	return Amounts{t.Memory.MilliValue(), t.CPU.MilliValue(), t.Pids * 1000}
}
