package cgroups

import (
	"fmt"
	"time"
)

// Reason says why a kill is not proven. The empty Reason goes with a
// proven kill.
type Reason string

const (
	// ReasonDeadline: the context's deadline passed while the child still
	// held processes.
	ReasonDeadline Reason = "Deadline"
	// ReasonStillPopulated: the wait was cut short for another reason (the
	// context was cancelled, a kill step failed) with processes left.
	ReasonStillPopulated Reason = "StillPopulated"
	// ReasonNoDelegation: no delegated hierarchy, nothing to prove with.
	ReasonNoDelegation Reason = "NoDelegation"
	// ReasonPermission: the cgroup files could not be written or read.
	ReasonPermission Reason = "Permission"
	// ReasonError: any other failure to read or write the cgroup.
	ReasonError Reason = "Error"
)

// Proof is the result of KillAndEmpty: Proven when the child was seen
// empty (or absent), otherwise the Reason and what was last seen.
type Proof struct {
	Child     string
	Proven    bool
	Reason    Reason        // empty when Proven
	Remaining int           // processes seen in the last look
	Err       error         // the failure behind Reason, if any
	Took      time.Duration // from the first kill to the verdict
}

// Error renders an unproven kill; a proven one is "".
func (p Proof) Error() string {
	if p.Proven {
		return ""
	}
	msg := fmt.Sprintf("kill of %s unproven (%s): %d process(es) left", p.Child, p.Reason, p.Remaining)
	if p.Err != nil {
		msg += ": " + p.Err.Error()
	}
	return msg
}

// AsError is nil for a proven kill and an *UnprovenError otherwise, for
// callers that pass errors along.
func (p Proof) AsError() error {
	if p.Proven {
		return nil
	}
	return &UnprovenError{Proof: p}
}

// UnprovenError carries an unproven Proof through error chains.
type UnprovenError struct{ Proof Proof }

func (e *UnprovenError) Error() string { return e.Proof.Error() }
func (e *UnprovenError) Unwrap() error { return e.Proof.Err }
