// Package nodewatch is the cluster side of a node's liveness: it runs
// apart from every node (its own Deployment) and says on each Instance
// what its node's agent cannot say for itself: that no agent enrolled the
// node (Reconciling=True, NoAgent), or that the agent stopped renewing its
// Lease (Ready=Unknown, NodeLost). kstatus, Argo CD and `kubectl wait`
// then read the truth instead of the last thing an agent wrote.
package nodewatch

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/nodelease"
)

// Facts are what the health of an Instance's node is decided from.
type Facts struct {
	Node string
	// Enrolled: the node has an Enrollment (an agent ran there once).
	Enrolled bool
	// Lease is the agent's Lease; nil when there is none.
	Lease *coordinationv1.Lease
	Now   time.Time
}

// Verdict is what Health decides: conditions to set (none when the node's
// agent answers for the Instance itself) and when to look again.
type Verdict struct {
	Conditions []metav1.Condition
	// Recheck is when the Lease runs out if it is not renewed (0: no
	// need, an event will come).
	Recheck time.Duration
}

func (v Verdict) sets(typ string) bool {
	for _, c := range v.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// Health decides from facts alone.
func Health(f Facts) Verdict {
	if !f.Enrolled {
		return Verdict{Conditions: []metav1.Condition{{
			Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonNoAgent,
			Message: fmt.Sprintf("no unitlet agent has enrolled node %s: run the DaemonSet there, or place the Instance on a node that has one", f.Node),
		}}}
	}
	expiry, ok := nodelease.Expiry(f.Lease)
	if ok && f.Now.Before(expiry) {
		return Verdict{Recheck: expiry.Sub(f.Now)}
	}
	msg := fmt.Sprintf("the agent on node %s holds no Lease: nothing on the node answers for this Instance", f.Node)
	if ok {
		msg = fmt.Sprintf("the agent on node %s last renewed its Lease at %s; what runs there is unknown", f.Node, f.Lease.Spec.RenewTime.UTC().Format(time.RFC3339))
	}
	// Ready=Unknown for kubectl wait and Argo CD; Reconciling=True for
	// kstatus (Flux), which reads no Ready.
	return Verdict{Conditions: []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionUnknown, Reason: v1.ReasonNodeLost, Message: msg},
		{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonNodeLost, Message: msg},
	}}
}

// Lost says whether Health declares f's node lost (NodeLost), and since
// when: its Lease's expiry, zero when it holds no Lease that says one.
// Placement moves an Instance off a node lost for long enough.
func Lost(f Facts) (bool, time.Time) {
	if !f.Enrolled || !Health(f).sets(v1.ConditionReady) {
		return false, time.Time{}
	}
	expiry, _ := nodelease.Expiry(f.Lease)
	return true, expiry
}
