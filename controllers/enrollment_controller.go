package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/join"
)

// NodeFacts are what an Enrollment reports about its node besides the
// checks: they change at most with a reboot or a new agent.
type NodeFacts struct {
	join.Identity
	AgentVersion string
	CgroupMode   string
	UnitBackend  string
}

// EnrollmentReporter keeps this node's Enrollment (named after the node):
// it creates it, reads the administrator's approval from it, and writes
// the node's identity, guard checks and mode to its status. The joining
// loop in the agent calls it; it decides nothing itself.
type EnrollmentReporter struct {
	// Client reads and writes the API directly: the joining loop runs
	// before, and apart from, the hosting reconcilers' cache.
	Client   client.Client
	NodeName string
}

// list and watch serve the agent's watch of its own Enrollment (selected
// by name), which notices an approval at once.
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;create;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments/status,verbs=get;update;patch

// Approved returns this node's Enrollment, creating it (not approved)
// when it does not exist yet, and whether an administrator approved it.
func (r *EnrollmentReporter) Approved(ctx context.Context) (*hostingv1alpha1.Enrollment, bool, error) {
	var enr hostingv1alpha1.Enrollment
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.NodeName}, &enr)
	if apierrors.IsNotFound(err) {
		enr = hostingv1alpha1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}
		err = r.Client.Create(ctx, &enr)
		if apierrors.IsAlreadyExists(err) {
			err = r.Client.Get(ctx, client.ObjectKey{Name: r.NodeName}, &enr)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("enrollment %s: %w", r.NodeName, err)
	}
	return &enr, enr.Spec.Approved, nil
}

// Report writes facts, checks and the decision to enr's status. It sends
// nothing when the status would not change, so an idle node costs the
// API server a read per re-check and no write.
func (r *EnrollmentReporter) Report(ctx context.Context, enr *hostingv1alpha1.Enrollment, facts NodeFacts, checks []join.Check, d join.Decision) error {
	orig := enr.DeepCopy()
	st := &enr.Status
	st.ObservedGeneration = enr.Generation
	st.MachineID, st.BootID = facts.MachineID, facts.BootID
	st.AgentVersion, st.Platform, st.Kernel = facts.AgentVersion, facts.Platform, facts.Kernel
	st.CgroupMode, st.UnitBackend = facts.CgroupMode, facts.UnitBackend
	st.Mode = hostingv1alpha1.ModeJoining
	if d.Mode == join.ModeHosting {
		st.Mode = hostingv1alpha1.ModeHosting
	}
	st.Checks = make([]hostingv1alpha1.GuardCheck, 0, len(checks))
	for _, c := range checks {
		st.Checks = append(st.Checks, hostingv1alpha1.GuardCheck{Name: c.Name, Passed: c.Passed, Message: c.Message})
	}
	for _, c := range enrollmentConditions(enr, d) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if equality.Semantic.DeepEqual(orig.Status, enr.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, enr, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("enrollment %s status: %w", r.NodeName, err)
	}
	return nil
}

// enrollmentConditions are GuardArmed, Enrolled and Hosting for d.
func enrollmentConditions(enr *hostingv1alpha1.Enrollment, d join.Decision) []metav1.Condition {
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: enr.Generation}
	}
	armed := cond(hostingv1alpha1.ConditionGuardArmed, true, hostingv1alpha1.ReasonArmed, "every guard check passed")
	if !d.Armed {
		armed = cond(hostingv1alpha1.ConditionGuardArmed, false, hostingv1alpha1.ReasonGuardCheckFailed, d.Failing)
	}
	enrolled := cond(hostingv1alpha1.ConditionEnrolled, true, hostingv1alpha1.ReasonApproved, "spec.approved is true")
	switch {
	case enr.Spec.Approved:
	case d.Stage == join.StageApprovalRevoked:
		enrolled = cond(hostingv1alpha1.ConditionEnrolled, false, hostingv1alpha1.ReasonApprovalRevoked, "spec.approved was withdrawn after the node hosted")
	default:
		enrolled = cond(hostingv1alpha1.ConditionEnrolled, false, hostingv1alpha1.ReasonAwaitingApproval, "waiting for an administrator to set spec.approved")
	}
	msg := d.Reason
	if d.Accepting {
		msg = "approved and armed: accepting new work"
	}
	hosting := cond(hostingv1alpha1.ConditionHosting, d.Accepting, string(d.Stage), msg)
	return []metav1.Condition{armed, enrolled, hosting}
}
