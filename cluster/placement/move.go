package placement

import (
	"fmt"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// NodeHealth is what a move is decided from about the Instance's node.
type NodeHealth struct {
	// Enrolled: the node has an Enrollment; Approved: it is approved.
	Enrolled, Approved bool
	// Lost: nodewatch declares it lost, since LostSince.
	Lost      bool
	LostSince time.Time
	// Expiry is when its Lease runs out if not renewed (zero: unknown).
	Expiry time.Time
}

// MoveWhy says why inst must move off spec.nodeName now ("" when it
// need not), and when to look again if it may have to later (its node's
// Lease running out, then lostAfterSeconds passing). Only an Instance
// whose moves are Allowed moves. One whose move is in flight (the
// serving node, status.nodeName, is not yet spec.nodeName) moves again
// only if its target is itself gone, unapproved or lost: never for a
// drain's annotation, which waits for the move to end.
func MoveWhy(inst *v1.Instance, h NodeHealth, now time.Time) (string, time.Duration) {
	if !inst.Spec.MovesAllowed() {
		return "", 0
	}
	node := inst.Spec.NodeName
	inFlight := inst.Status.NodeName != "" && inst.Status.NodeName != node
	if !inFlight && inst.Annotations[v1.AnnotationMoveFrom] == node {
		return fmt.Sprintf("node %s is being drained", node), 0
	}
	switch {
	case !h.Enrolled:
		return fmt.Sprintf("node %s has no Enrollment", node), 0
	case !h.Approved:
		return fmt.Sprintf("node %s's Enrollment is not approved", node), 0
	}
	after := time.Duration(lostAfterSeconds(inst)) * time.Second
	if h.Lost {
		if wait := h.LostSince.Add(after).Sub(now); wait > 0 {
			return "", wait
		}
		return fmt.Sprintf("node %s is lost since %s", node, h.LostSince.UTC().Format(time.RFC3339)), 0
	}
	if !h.Expiry.IsZero() {
		return "", max(h.Expiry.Add(after).Sub(now), time.Second)
	}
	return "", 0
}

func lostAfterSeconds(inst *v1.Instance) int32 {
	if p := inst.Spec.Placement; p != nil && p.LostAfterSeconds != nil {
		return *p.LostAfterSeconds
	}
	return v1.DefaultLostAfterSeconds
}
