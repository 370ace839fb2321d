package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/enrollment"
	"github.com/unitlet/unitlet/runtime/join"
)

// enrollmentScope is one round of the Enrollment reconcile: what its
// phases learnt, each from the ones before, and whether one of them
// settled the round.
type enrollmentScope struct {
	lease    NodeLease
	checks   []join.Check
	enr      *v1.Enrollment
	approved bool
	decision join.Decision
	capacity capacityLists
	done     bool
}

// enrollmentPhase is one step of a round. A non-zero result, an error or
// s.done ends the round after it.
type enrollmentPhase func(ctx context.Context, s *enrollmentScope) (ctrl.Result, error)

// Reconcile is one round: lease, guard, approval, owner, preparation,
// decision and gate, capacity, report.
func (r *EnrollmentReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	s := &enrollmentScope{}
	phases := []enrollmentPhase{r.leaseHeld, r.checkGuard, r.readApproval, r.ownByNode, r.prepareGuard, r.decide, r.readCapacity, r.reportStatus}
	for _, phase := range phases {
		if res, err := phase(ctx, s); err != nil || !res.IsZero() || s.done {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// leaseHeld stops the round, and hosting, while another machine's agent
// holds this node's Lease.
func (r *EnrollmentReconciler) leaseHeld(_ context.Context, s *enrollmentScope) (ctrl.Result, error) {
	s.lease = r.nodeLease()
	r.mu.Lock()
	r.claimErr = s.lease.Conflict
	r.mu.Unlock()
	if s.lease.Conflict == nil {
		return ctrl.Result{}, nil
	}
	if r.Gate.Set(false) {
		metrics.SetMode(metrics.ModeJoining)
	}
	r.Log.V(1).Info("not hosting until this node's Lease is this agent's", "reason", s.lease.Conflict.Error())
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// checkGuard reads the guard's checks.
func (r *EnrollmentReconciler) checkGuard(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	s.checks = r.Guard.Check(ctx)
	return ctrl.Result{}, nil
}

// readApproval reads (or creates) the Enrollment and the administrator's
// word; a failure leaves the mode as it was.
func (r *EnrollmentReconciler) readApproval(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	enr, approved, err := r.approved(ctx)
	if r.apiLog.changed(err) {
		r.Log.Error(err, "the API could not be read or written; the mode stays as it was")
	}
	s.enr, s.approved = enr, approved
	return ctrl.Result{}, err
}

// ownByNode makes the Enrollment owned by its Node (enrollment.Own), so
// the garbage collector deletes it with the Node: at the first round,
// then at most every OwnerEvery, which adds the owner once a Node
// registered after the Enrollment appears, and mends it when the Node was
// registered anew (a new uid). A failure is logged once per cause and
// tried again next round; the mode does not depend on it.
func (r *EnrollmentReconciler) ownByNode(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	now := r.Clock.Now()
	if !r.ownedAt.IsZero() && now.Sub(r.ownedAt) < r.OwnerEvery {
		return ctrl.Result{}, nil
	}
	patched, err := enrollment.Own(ctx, r.Client, s.enr)
	if r.ownerLog.changed(err) {
		r.Log.Error(err, "the Enrollment's owner (its Node) could not be set; trying again")
	}
	if err != nil {
		return ctrl.Result{}, nil
	}
	r.ownedAt = now
	if patched {
		r.Log.Info("the Enrollment is owned by its Node: it goes with the Node", "owners", s.enr.OwnerReferences)
	}
	return ctrl.Result{}, nil
}

// prepareGuard prepares the guard while approved but not armed, at most
// every PrepareEvery, and checks it again.
func (r *EnrollmentReconciler) prepareGuard(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	if armed, _ := join.Armed(s.checks); !s.approved || armed {
		return ctrl.Result{}, nil
	}
	if now := r.Clock.Now(); r.prepared.IsZero() || now.Sub(r.prepared) >= r.PrepareEvery {
		r.prepared = now
		if err := r.Guard.Prepare(); r.prepareLog.changed(err) {
			r.Log.Error(err, "guard preparation incomplete")
		}
		s.checks = r.Guard.Check(ctx)
	}
	return ctrl.Result{}, nil
}

// decide decides the mode and applies it: the gate, and hosting started
// the first time the node may. A failure to start hosting is Fatal's.
func (r *EnrollmentReconciler) decide(_ context.Context, s *enrollmentScope) (ctrl.Result, error) {
	s.decision = join.Decide(join.Facts{Approved: s.approved, Checks: s.checks, Hosted: r.hosted, LeaseNotHeld: s.lease.notHeld()})
	if err := r.apply(s.decision); err != nil {
		r.Fatal(err)
		s.done = true
	}
	return ctrl.Result{}, nil
}

// reportStatus writes identity, checks and mode to the Enrollment's
// status, and asks for the next round after Every.
func (r *EnrollmentReconciler) reportStatus(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	err := r.report(ctx, s.enr, s.checks, s.decision, s.lease, s.capacity)
	if r.reportLog.changed(err) {
		r.Log.Error(err, "the Enrollment's status could not be written")
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.Every}, nil
}
