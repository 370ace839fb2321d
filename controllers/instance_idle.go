package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/node"
)

// idleAfter is the Instance's socketActivation.idleAfter (0: never).
func idleAfter(inst *v1.Instance) time.Duration {
	if a := inst.Spec.SocketActivation; a != nil && a.IdleAfter != nil {
		return a.IdleAfter.Duration
	}
	return 0
}

// sleepDecision is what decideSleep says a reconcile does.
type sleepDecision int

const (
	stayAwake sleepDecision = iota
	fallAsleep
	staySleeping
	wake
)

// decideSleep is the idle rule as a pure function: a serving Instance
// whose socket got no connection for idle, with none queued or open
// now, falls asleep; a sleeping one wakes at a connection after it fell
// asleep. recheck is when to look again while awake.
func decideSleep(idle time.Duration, now time.Time, sleeping *metav1.Time, serving bool, a node.Activity) (d sleepDecision, recheck time.Duration) {
	if sleeping != nil {
		if a.Held && a.Last.After(sleeping.Time) {
			return wake, 0
		}
		return staySleeping, 0
	}
	if idle == 0 || !serving || !a.Held {
		return stayAwake, 0
	}
	if quiet := now.Sub(a.Last); quiet < idle {
		return stayAwake, idle - quiet
	}
	if a.Busy {
		return stayAwake, idle
	}
	return fallAsleep, 0
}

// sleepOrWake, before the swap: a sleeping Instance keeps nothing
// running and the agent its socket, until a connection wakes it.
func (r *InstanceReconciler) sleepOrWake(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	st := &s.inst.Status
	if idleAfter(s.inst) == 0 {
		if st.IdleSince != nil {
			// idleAfter removed while asleep: it wakes now.
			st.IdleSince, st.WokenAt = nil, &metav1.Time{Time: r.Clock.Now()}
		}
		return ctrl.Result{}, nil
	}
	a := r.Runtime.Activity(s.ref())
	d, _ := decideSleep(idleAfter(s.inst), r.Clock.Now(), st.IdleSince, false, a)
	switch d {
	case wake:
		st.IdleSince, st.WokenAt = nil, &metav1.Time{Time: a.Last}
		r.event(s.inst, corev1.EventTypeNormal, v1.ReasonWaking, "Wake", "a connection arrived: a generation starts to answer it")
		return ctrl.Result{}, nil
	case staySleeping:
		s.done = true
		return ctrl.Result{}, s.sleep(ctx)
	}
	return ctrl.Result{}, nil
}

// sleep retires every generation and holds the socket once they are
// proven gone.
func (s *instanceScope) sleep(ctx context.Context) error {
	gone, err := s.retireAll(ctx, RetiredIdle)
	if err != nil {
		return err
	}
	if !gone {
		s.progress(v1.ReasonIdle, "idle since %s: waiting for every generation to be proven gone", s.inst.Status.IdleSince.Format(time.RFC3339))
		return nil
	}
	s.inst.Status.ActiveGeneration = 0
	if err := s.r.Runtime.Listen(ctx, s.ref()); err != nil {
		return fmt.Errorf("hold the socket while idle: %w", err)
	}
	s.note = note{reason: v1.ReasonIdle, msg: fmt.Sprintf("idle since %s: no generation runs; the agent holds the socket and the next connection starts one",
		s.inst.Status.IdleSince.Format(time.RFC3339))}
	return nil
}

// fallAsleepIfIdle, after the swap: a serving Instance whose socket got
// no connection for idleAfter goes to sleep; otherwise it is looked at
// again when it could be.
func (r *InstanceReconciler) fallAsleepIfIdle(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	idle := idleAfter(s.inst)
	if idle == 0 || s.inst.Status.IdleSince != nil {
		return ctrl.Result{}, nil
	}
	active := s.number(s.inst.Status.ActiveGeneration)
	serving := active != nil && ready(active) && !active.Spec.Retired && active == s.latest()
	now := r.Clock.Now()
	d, recheck := decideSleep(idle, now, nil, serving, r.Runtime.Activity(s.ref()))
	if d != fallAsleep {
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	s.inst.Status.IdleSince = &metav1.Time{Time: now}
	r.event(s.inst, corev1.EventTypeNormal, v1.ReasonIdle, "Sleep", "no connection for %s: generation %d stops; the next connection starts one",
		idle, active.Spec.Number)
	return ctrl.Result{}, s.sleep(ctx)
}

// woken records, at the promotion that ends a wake, how long its first
// connection waited for a generation to serve.
func (s *instanceScope) woken() {
	st := &s.inst.Status
	if st.WokenAt == nil {
		return
	}
	waited := s.r.Clock.Since(st.WokenAt.Time)
	metrics.ObserveWake(waited)
	s.r.event(s.inst, corev1.EventTypeNormal, "Woken", "Wake", "generation %d serves; the connection that woke it waited %s",
		st.ActiveGeneration, waited.Round(time.Millisecond))
	st.WokenAt = nil
}
