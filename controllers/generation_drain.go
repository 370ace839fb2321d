package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/node"
)

// DefaultDrainLimit is spec.drainLimitSeconds' default, for a Generation
// whose Instance is gone.
const DefaultDrainLimit = 30 * time.Second

// drainFact is a superseded generation's drain as seen now.
type drainFact struct {
	state node.DrainState
	err   error // the look failed: waited on, like a connection still open
	took  time.Duration
	limit time.Duration
	// ended: "" while waiting, else ReasonDrainProven or ReasonDrainLimit.
	ended string
	began time.Time
	// repeat: the end was reported already; only the status is written.
	repeat bool
}

// drain holds a superseded generation's stop until the kernel shows its
// listener drained, or its Instance's drain limit passes. A generation
// clients still reach (Replace, suspend, delete) or one with nothing
// running needs none and is stopped at once.
func (r *GenerationReconciler) drain(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	gen := s.gen
	if meta.IsStatusConditionTrue(gen.Status.Conditions, v1.ConditionTerminated) {
		r.draining.Delete(gen.UID)
		return ctrl.Result{}, nil
	}
	c := meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionDrained)
	if c != nil && c.Status != metav1.ConditionUnknown {
		return ctrl.Result{}, nil // the wait is over
	}
	if d, ok := r.draining.Load(gen.UID); ok && d.(*drainFact).ended != "" {
		// Ended by this process, and its status not written (a lost
		// patch): said again, not counted again.
		again := *d.(*drainFact)
		again.repeat = true
		s.facts.drain = &again
		return ctrl.Result{}, nil
	}
	limit := r.drainLimit(ctx, gen)
	if limit == 0 && c == nil {
		return ctrl.Result{}, nil
	}
	st, err := r.Runtime.Drain(ctx, refOf(gen))
	if err == nil && !st.Needed && c == nil {
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	began := now
	if c != nil {
		began = c.LastTransitionTime.Time // begun before this process
	}
	f := &drainFact{began: began}
	if d, ok := r.draining.LoadOrStore(gen.UID, f); ok {
		f = d.(*drainFact)
	}
	f.state, f.err, f.took, f.limit = st, err, now.Sub(f.began), limit
	switch {
	case err == nil && (st.Proven || !st.Needed):
		// Not needed any more: what it held is gone with it.
		f.ended = v1.ReasonDrainProven
	case f.took >= limit:
		f.ended = v1.ReasonDrainLimit
	}
	s.facts.drain = f
	if f.ended == "" {
		return ctrl.Result{RequeueAfter: drainWait(f.took)}, nil
	}
	metrics.ObserveDrain(f.ended, f.took)
	return ctrl.Result{}, nil
}

// drainWait is the wait before the next look: short at first, since most
// connections finish within milliseconds, then a quarter of the time
// spent, up to a second.
func drainWait(spent time.Duration) time.Duration {
	return min(time.Second, max(20*time.Millisecond, spent/4))
}

// drainLimit is the Instance's spec.drainLimitSeconds.
func (r *GenerationReconciler) drainLimit(ctx context.Context, gen *v1.Generation) time.Duration {
	inst := r.instanceOf(ctx, gen)
	if inst == nil || inst.Spec.DrainLimitSeconds == nil {
		return DefaultDrainLimit
	}
	return time.Duration(*inst.Spec.DrainLimitSeconds) * time.Second
}

// drainedMsg says a proven drain, in the Drained condition.
func drainedMsg(f *drainFact) string {
	return fmt.Sprintf("drained in %s: nothing queued, no accepted connection open", f.took.Round(time.Millisecond))
}

// drainStatus writes the Drained condition from f and returns the event
// its end calls for: only a drain its limit cut short (on the Instance:
// it is the swap's).
func drainStatus(gen *v1.Generation, f *drainFact, set func(typ string, status metav1.ConditionStatus, reason, msg string)) *genEvent {
	n := gen.Spec.Number
	what := f.state.String()
	if f.err != nil {
		what = f.err.Error()
	}
	switch f.ended {
	case v1.ReasonDrainProven:
		// No Event: the condition says it, with what it took.
		set(v1.ConditionDrained, metav1.ConditionTrue, v1.ReasonDrainProven, drainedMsg(f))
		return nil
	case v1.ReasonDrainLimit:
		msg := fmt.Sprintf("drain limit %s reached (%s); stopped anyway", f.limit, what)
		set(v1.ConditionDrained, metav1.ConditionFalse, v1.ReasonDrainLimit, msg)
		if f.repeat {
			return nil
		}
		return &genEvent{typ: corev1.EventTypeWarning, reason: v1.ReasonDrainLimit, action: "Drain",
			msg: fmt.Sprintf("generation %d: %s", n, msg), onInstance: true}
	}
	set(v1.ConditionDrained, metav1.ConditionUnknown, v1.ReasonDraining,
		fmt.Sprintf("superseded; waiting for its listener to drain (%s after %s, limit %s)", what, f.took.Round(time.Millisecond), f.limit))
	return nil
}
