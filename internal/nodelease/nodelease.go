// Package nodelease is the node's coordination Lease as both sides read
// it: the agent renews it on every node, nodewatch reads it once per
// cluster. Neither side imports the other; both import this leaf.
package nodelease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The node's Lease, as the kubelet keeps one: renewed every Renew, valid
// for Duration, so nodewatch marks the node's Instances NodeLost within
// Duration of the agent's end.
const (
	Renew    = 10 * time.Second
	Duration = 40 * time.Second
)

// Expiry is when an agent's lease runs out: its last renewal plus its
// duration; false when it says neither.
func Expiry(lease *coordinationv1.Lease) (time.Time, bool) {
	if lease == nil || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second), true
}
