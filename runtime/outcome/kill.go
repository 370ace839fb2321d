package outcome

import (
	"context"
	"errors"
	"fmt"
)

// KillReason says why a kill was not proven. Each is one CamelCase word so
// it can be a condition reason as it is.
type KillReason string

const (
	// CgroupNotEmpty: the cgroup still held processes when the proof ended.
	CgroupNotEmpty KillReason = "CgroupNotEmpty"
	// UnitActive: the manager still reported the unit active.
	UnitActive KillReason = "UnitActive"
	// StopUnanswered: the stop call failed or its answer was lost.
	StopUnanswered KillReason = "StopUnanswered"
	// ProofTimedOut: the proof's budget ran out first.
	ProofTimedOut KillReason = "ProofTimedOut"
	// Cancelled: the proof was cut short, e.g. by the agent's shutdown.
	Cancelled KillReason = "Cancelled"
	// NoDelegation: there is no cgroup the agent may read or kill.
	NoDelegation KillReason = "NoDelegation"
	// Permission: the kernel or manager refused the kill.
	Permission KillReason = "Permission"
)

// ErrKillUnproven is found by errors.Is in every Unproven kill's error.
var ErrKillUnproven = errors.New("kill unproven")

// Kill is the result of a kill or a stop with its proof.
type Kill struct {
	Proven bool
	// Reason is set when not Proven.
	Reason KillReason
	// Cause is the error behind an Unproven kill, if any.
	Cause error
}

// ProvenKill is a kill whose emptiness was seen.
func ProvenKill() Kill { return Kill{Proven: true} }

// Unproven is a kill that was not proven for reason, with cause (may be nil).
func Unproven(reason KillReason, cause error) Kill {
	return Kill{Reason: reason, Cause: cause}
}

// Err is nil when Proven; otherwise an error carrying the reason, with the
// cause's text and errors.Is, that also matches ErrKillUnproven.
func (k Kill) Err() error {
	if k.Proven {
		return nil
	}
	cause := k.Cause
	if cause == nil {
		cause = fmt.Errorf("kill unproven: %s", k.Reason)
	}
	return killMark{reason: k.Reason, err: cause}
}

// killMark carries a KillReason through an error chain without changing
// the text of the error it wraps.
type killMark struct {
	reason KillReason
	err    error
}

func (m killMark) Error() string        { return m.err.Error() }
func (m killMark) Unwrap() error        { return m.err }
func (m killMark) Is(target error) bool { return target == ErrKillUnproven }

// KillOf reads a kill's result back from an error: nil is Proven; an error
// with no reason of its own is Unproven with ProofTimedOut or Cancelled
// when it is a context's error and with CgroupNotEmpty otherwise, since
// only a proof may say a cgroup is empty.
func KillOf(err error) Kill {
	if err == nil {
		return ProvenKill()
	}
	var m killMark
	if errors.As(err, &m) {
		return Unproven(m.reason, err)
	}
	return Unproven(ReasonFor(err), err)
}

// ReasonFor names the reason a proof that failed with err was cut short:
// the context's own errors map to ProofTimedOut and Cancelled.
func ReasonFor(err error) KillReason {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ProofTimedOut
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	return CgroupNotEmpty
}
