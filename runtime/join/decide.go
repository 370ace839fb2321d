package join

// Mode is what the node does: Joining hosts nothing new, Hosting runs
// the node's Instances.
type Mode string

const (
	ModeJoining Mode = "Joining"
	ModeHosting Mode = "Hosting"
)

// Stage says why a node is in its mode; it is what the readiness endpoint
// and the Enrollment's Hosting condition report.
type Stage string

const (
	// StageAwaitingApproval: spec.approved is not true yet.
	StageAwaitingApproval Stage = "AwaitingApproval"
	// StageGuardNotArmed: approved, but a guard check fails.
	StageGuardNotArmed Stage = "GuardNotArmed"
	// StageHosting: approved and armed; new work is accepted.
	StageHosting Stage = "Hosting"
	// StageApprovalRevoked: it hosted, then approval was withdrawn.
	StageApprovalRevoked Stage = "ApprovalRevoked"
	// StageGuardDisarmed: it hosted, then a guard check began to fail.
	StageGuardDisarmed Stage = "GuardDisarmed"
	// StageLeaseNotHeld: the agent could never write its node's Lease
	// (its namespace missing, its rights wrong), so the node cannot be
	// seen alive and hosts nothing, approved or not.
	StageLeaseNotHeld Stage = "LeaseNotHeld"
)

// Facts are what a decision is made from.
type Facts struct {
	// Approved is the Enrollment's spec.approved.
	Approved bool
	// Checks are the guard's latest results.
	Checks []Check
	// Hosted: this process has hosted before (its reconcilers run).
	Hosted bool
	// LeaseNotHeld, when not empty, is why this agent never held its
	// node's Lease (the API's error).
	LeaseNotHeld string
}

// Decision is the node's mode and why.
type Decision struct {
	Mode  Mode
	Stage Stage
	// Reason says in words what holds the node back ("" when hosting).
	Reason string
	// Accepting: new work may start. Running work is never stopped by a
	// decision; only new starts wait for Accepting.
	Accepting bool
	// Armed: every guard check passed; Failing names those that did not.
	Armed   bool
	Failing string
}

// Decide picks the mode: hosting needs approval and an armed guard. A node
// that hosted and loses either stops accepting new work, and says which;
// what it runs keeps running.
func Decide(f Facts) Decision {
	armed, failing := Armed(f.Checks)
	d := Decision{Mode: ModeJoining, Armed: armed, Failing: failing}
	switch {
	case f.LeaseNotHeld != "":
		d.Stage = StageLeaseNotHeld
		d.Reason = "the node's Lease cannot be written (" + f.LeaseNotHeld + "): nothing is hosted, approved or not, until the agent holds it"
	case f.Approved && armed:
		d.Mode, d.Stage, d.Accepting = ModeHosting, StageHosting, true
	case f.Hosted && !f.Approved:
		d.Stage = StageApprovalRevoked
		d.Reason = "approval was withdrawn: no new work is accepted; running Instances keep running"
	case f.Hosted:
		d.Stage = StageGuardDisarmed
		d.Reason = "guard check failed (" + failing + "): no new work is accepted; running Instances keep running"
	case !f.Approved && armed:
		d.Stage = StageAwaitingApproval
		d.Reason = "guard armed; waiting for an administrator to set spec.approved"
	case !f.Approved:
		d.Stage = StageAwaitingApproval
		d.Reason = "waiting for an administrator to set spec.approved; guard not armed (" + failing + ")"
	default:
		d.Stage = StageGuardNotArmed
		d.Reason = "approved; guard not armed (" + failing + ")"
	}
	return d
}
