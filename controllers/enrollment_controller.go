package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/enrollment"
	"github.com/unitlet/unitlet/runtime/diskspace"
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

// Guard is the part of join.Guard the reconciler uses.
type Guard interface {
	Check(ctx context.Context) []join.Check
	Prepare() error
}

// EnrollmentReconciler owns this node's Enrollment (named after the node):
// it creates it, reads the administrator's word (approval),
// checks the guard and prepares it when approved, decides the mode
// (join.Decide), opens or closes the gate, starts hosting the first time
// the node may, and reports identity, checks and mode to the status. It
// runs on every change of the Enrollment's spec and every Every besides:
// the guard's checks change with no event. A failed API read or write
// leaves the mode as it was (unknown is not joining) and is retried with
// APIBackoff.
type EnrollmentReconciler struct {
	// Client reads and writes the API directly: the mode is decided
	// on what the API server says now, not on a cache.
	Client   client.Client
	NodeName string
	Guard    Guard
	Facts    NodeFacts
	Gate     *hostgate.Switch
	// Lease, when set, says how this agent's node Lease stands (see
	// NodeLease); it is reported as the NodeLease condition.
	Lease func() NodeLease
	// Disk, when set, reads the state root's file system each round;
	// DiskPressure is True while less than DiskPressureFree (a fraction
	// of its size) is free (see diskPressureCondition).
	Disk             func() (diskspace.Usage, error)
	DiskPressureFree float64
	// Capacity, when set, reports the node's capacity, allocatable and
	// allocated (see CapacityReport); its Generations' changes start a
	// round after its Debounce.
	Capacity *CapacityReport
	// StartHosting registers the hosting reconcilers; called once. Its
	// failure is Fatal's: the agent cannot host, and stops.
	StartHosting func() error
	Fatal        func(error)
	Clock        clock.PassiveClock
	// Every is the re-check period; PrepareEvery bounds how often the
	// guard is prepared while approved but not armed; OwnerEvery how
	// often the Enrollment's owner (its Node) is checked (see ownByNode).
	Every, PrepareEvery, OwnerEvery time.Duration
	Log                             logr.Logger

	// mu guards current and known, which the probes read; the rest is
	// the one reconcile worker's.
	mu       sync.Mutex
	current  join.Decision
	known    bool
	claimErr error
	hosted   bool
	prepared time.Time
	ownedAt  time.Time
	// One per cause of an error log: see logChange.
	apiLog, prepareLog, reportLog, capacityLog, ownerLog logChange
}

// NodeLease is how this agent's node Lease stands.
type NodeLease struct {
	// Conflict: another machine's agent holds and renews the Lease (two
	// machines claim one node name), or none was tried yet. While set, the
	// reconciler reads and writes nothing of the Enrollment and hosts
	// nothing.
	Conflict error
	// Held: this agent has held the Lease since it started.
	Held bool
	// Err is the last renewal's error; nil once one succeeded.
	Err error
}

// list and watch serve the watch of its own Enrollment (selected by name),
// which notices an approval at once.
// patch adds the Enrollment's owner (its Node); the policy
// unitlet-agent-node-scoped keeps the agent from changing its spec.
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;create;list;watch;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments/status,verbs=get;update;patch

// apply starts the hosting reconcilers the first time the node may host,
// sets the gate, and logs a line when the stage or its reason changes.
func (r *EnrollmentReconciler) apply(d join.Decision) error {
	if d.Accepting && !r.hosted {
		r.Log.Info("approved and armed: starting the hosting reconcilers")
		if err := r.StartHosting(); err != nil {
			return fmt.Errorf("hosting could not start: %w", err)
		}
		r.hosted = true
	}
	r.Gate.Set(d.Accepting)
	if d.Accepting {
		metrics.SetMode(metrics.ModeHosting)
	} else {
		metrics.SetMode(metrics.ModeJoining)
	}
	r.mu.Lock()
	prev, known := r.current, r.known
	r.current, r.known = d, true
	r.mu.Unlock()
	if known && prev.Stage == d.Stage && prev.Reason == d.Reason {
		return nil
	}
	if prev.Stage != d.Stage {
		r.prepared = time.Time{} // a new stage may prepare at once
	}
	r.Log.Info("mode", "mode", d.Mode, "stage", d.Stage, "accepting", d.Accepting, "reason", d.Reason)
	return nil
}

// nodeLease is Lease's answer; without a Lease it is held.
func (r *EnrollmentReconciler) nodeLease() NodeLease {
	if r.Lease == nil {
		return NodeLease{Held: true}
	}
	return r.Lease()
}

// notHeld is why the Lease was never held ("" once it was): the Lease
// could not be written at all, which the Enrollment reports rather than
// hide the node from its administrator.
func (l NodeLease) notHeld() string {
	if l.Held || l.Err == nil {
		return ""
	}
	return l.Err.Error()
}

// Decision is the mode as last decided; known is false until the
// Enrollment was read once.
func (r *EnrollmentReconciler) Decision() (d join.Decision, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current, r.known
}

// Ready is the readiness check: the agent works once it has read its
// Enrollment; a later loss of the API server does not undo it. Whether
// the node may host is the Enrollment's and the mode metric's to say, not
// readiness': a node awaiting approval must not hold up a rollout.
func (r *EnrollmentReconciler) Ready() error {
	if _, known := r.Decision(); !known {
		return errors.New("joining: the Enrollment has not been read yet")
	}
	return nil
}

// Hosting fails, naming the stage, while the node accepts no new work.
func (r *EnrollmentReconciler) Hosting() error {
	d, known := r.Decision()
	r.mu.Lock()
	claimErr := r.claimErr
	r.mu.Unlock()
	switch {
	case claimErr != nil:
		return claimErr
	case !known:
		return errors.New("joining: the Enrollment has not been read yet")
	case !d.Accepting:
		return fmt.Errorf("%s: %s: %s", d.Mode, d.Stage, d.Reason)
	}
	return nil
}

// SetupWithManager runs the reconciler on the node's Enrollment: a first
// round at once (the Enrollment may not exist yet), then on its creation,
// deletion and spec changes (its own status writes change no generation),
// a change of what the node's Generations hold (with Capacity), and every
// Every.
func (r *EnrollmentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	first := make(chan event.TypedGenericEvent[*v1.Enrollment], 1)
	first <- event.TypedGenericEvent[*v1.Enrollment]{Object: &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}}
	onlyThisNode := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.NodeName })
	b := ctrl.NewControllerManagedBy(mgr).
		Named("enrollment").
		For(&v1.Enrollment{}, builder.WithPredicates(onlyThisNode, predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(first, &handler.TypedEnqueueRequestForObject[*v1.Enrollment]{}))
	if r.Capacity != nil {
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &v1.Generation{}, r.generationChanged()))
	}
	return b.
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 1, RateLimiter: APIBackoff(),
			// Every agent decides its own node's mode.
			NeedLeaderElection: ptr.To(false),
			// One per agent process; tests run several agents in one.
			SkipNameValidation: ptr.To(true),
		}).
		Complete(r)
}

// approved returns this node's Enrollment (see enrollment.Ensure) and
// whether an administrator approved it.
func (r *EnrollmentReconciler) approved(ctx context.Context) (*v1.Enrollment, bool, error) {
	enr, err := enrollment.Ensure(ctx, r.Client, r.NodeName)
	if err != nil {
		return nil, false, err
	}
	return enr, enr.Spec.Approved, nil
}

// report writes facts, checks and the decision to enr's status. It sends
// nothing when the status would not change, so an idle node costs the
// API server a read per re-check and no write.
func (r *EnrollmentReconciler) report(ctx context.Context, enr *v1.Enrollment, checks []join.Check, d join.Decision, lease NodeLease, lists capacityLists) error {
	facts := r.Facts
	orig := enr.DeepCopy()
	st := &enr.Status
	st.ObservedGeneration = enr.Generation
	st.MachineID, st.BootID = facts.MachineID, facts.BootID
	st.AgentVersion, st.Platform, st.Kernel = facts.AgentVersion, facts.Platform, facts.Kernel
	st.CgroupMode, st.UnitBackend = facts.CgroupMode, facts.UnitBackend
	st.Mode = v1.ModeJoining
	if d.Mode == join.ModeHosting {
		st.Mode = v1.ModeHosting
	}
	st.Checks = make([]v1.GuardCheck, 0, len(checks))
	for _, c := range checks {
		st.Checks = append(st.Checks, v1.GuardCheck{Name: c.Name, Passed: c.Passed, Message: c.Message})
	}
	for _, c := range enrollmentConditions(enr, d) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if r.Lease != nil {
		meta.SetStatusCondition(&st.Conditions, leaseCondition(enr, lease))
	}
	setCapacity(st, lists)
	if r.Disk != nil {
		usage, err := r.Disk()
		meta.SetStatusCondition(&st.Conditions, diskPressureCondition(enr, usage, err, r.DiskPressureFree))
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
func enrollmentConditions(enr *v1.Enrollment, d join.Decision) []metav1.Condition {
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: enr.Generation}
	}
	armed := cond(v1.ConditionGuardArmed, true, v1.ReasonArmed, "every guard check passed")
	if !d.Armed {
		armed = cond(v1.ConditionGuardArmed, false, v1.ReasonGuardCheckFailed, d.Failing)
	}
	enrolled := cond(v1.ConditionEnrolled, true, v1.ReasonApproved, "spec.approved is true")
	switch {
	case enr.Spec.Approved:
	case d.Stage == join.StageApprovalRevoked:
		enrolled = cond(v1.ConditionEnrolled, false, v1.ReasonApprovalRevoked, "spec.approved was withdrawn after the node hosted")
	default:
		enrolled = cond(v1.ConditionEnrolled, false, v1.ReasonAwaitingApproval, "waiting for an administrator to set spec.approved")
	}
	msg := d.Reason
	if d.Accepting {
		msg = "approved and armed: accepting new work"
	}
	hosting := cond(v1.ConditionHosting, d.Accepting, string(d.Stage), msg)
	return []metav1.Condition{armed, enrolled, hosting}
}

// leaseCondition is NodeLease for lease: False with the API's error while
// renewals fail, so an administrator sees why without the agent's log.
func leaseCondition(enr *v1.Enrollment, lease NodeLease) metav1.Condition {
	c := metav1.Condition{Type: v1.ConditionNodeLease, Status: metav1.ConditionTrue,
		Reason: v1.ReasonLeaseRenewed, Message: "the node's Lease is renewed by this agent", ObservedGeneration: enr.Generation}
	if lease.Err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1.ReasonLeaseNotRenewed, lease.Err.Error()
	}
	return c
}

// diskPressureCondition is DiskPressure for the state root's usage: True
// while less than threshold (a fraction of its size) is free, with the
// bytes free; Unknown when it could not be read. The message above the
// threshold names no byte count, so a node with room writes no status
// on each re-check.
func diskPressureCondition(enr *v1.Enrollment, u diskspace.Usage, err error, threshold float64) metav1.Condition {
	c := metav1.Condition{Type: v1.ConditionDiskPressure, ObservedGeneration: enr.Generation}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, v1.ReasonDiskUnreadable, err.Error()
	case u.Total == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, v1.ReasonDiskUnreadable, "the state root's file system reports no size"
	case float64(u.Free) < threshold*float64(u.Total):
		c.Status, c.Reason = metav1.ConditionTrue, v1.ReasonLowDiskSpace
		c.Message = fmt.Sprintf("%d bytes free of %d on the state root's file system, below %g%%: log lines are dropped and new work may fail",
			u.Free, u.Total, threshold*100)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, v1.ReasonEnoughDiskSpace
		c.Message = fmt.Sprintf("at least %g%% of the state root's file system is free", threshold*100)
	}
	return c
}
