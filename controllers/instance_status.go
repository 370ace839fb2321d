package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// computeInstanceStatus is the one place an Instance's conditions are
// decided, from its Generations and what the reconcile noted. ok: the
// reconcile succeeded, so observedGeneration may advance.
func computeInstanceStatus(inst *v1.Instance, gens []*v1.Generation, n note, ok bool) {
	observed := inst.Status.ObservedGeneration
	if ok {
		observed = inst.Generation
		inst.Status.ObservedGeneration = observed
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: observed,
		})
	}

	uncertain := startUncertain(gens)
	unproven := killUnproven(gens)
	if uncertain != nil {
		c := meta.FindStatusCondition(uncertain.Status.Conditions, v1.ConditionStarted)
		set(v1.ConditionStartUncertain, metav1.ConditionTrue, c.Reason,
			fmt.Sprintf("generation %d may have run: %s", uncertain.Spec.Number, c.Message))
	} else {
		set(v1.ConditionStartUncertain, metav1.ConditionFalse, v1.ReasonCertain, "every start's outcome is known")
	}
	switch {
	case unproven != nil:
		c := meta.FindStatusCondition(unproven.Status.Conditions, v1.ConditionTerminated)
		set(v1.ConditionKillUnproven, metav1.ConditionTrue, c.Reason,
			fmt.Sprintf("generation %d: %s", unproven.Spec.Number, c.Message))
	case n.unproven:
		set(v1.ConditionKillUnproven, metav1.ConditionTrue, n.reason, n.msg)
	default:
		set(v1.ConditionKillUnproven, metav1.ConditionFalse, v1.ReasonProven, "every retired generation is proven gone")
	}

	stalled := n.stalled
	if stalled {
		set(v1.ConditionStalled, metav1.ConditionTrue, n.reason, n.msg)
	} else {
		meta.RemoveStatusCondition(&inst.Status.Conditions, v1.ConditionStalled)
	}
	var active *v1.Generation
	for _, g := range gens {
		if g.Spec.Number == inst.Status.ActiveGeneration && !g.Spec.Retired {
			active = g
		}
	}
	idle, waking := inst.Status.IdleSince != nil, inst.Status.WokenAt != nil
	reconciling := n.reconciling || (active == nil && !inst.Spec.Suspend && !stalled && !idle)
	if reconciling {
		reason, msg := n.reason, n.msg
		if reason == "" {
			reason, msg = v1.ReasonProgressing, "waiting for a generation to serve"
		}
		if waking {
			reason, msg = v1.ReasonWaking, fmt.Sprintf("woken by a connection at %s: %s", inst.Status.WokenAt.Format(time.RFC3339), msg)
		}
		set(v1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(&inst.Status.Conditions, v1.ConditionReconciling)
	}

	switch {
	case unproven != nil || n.unproven:
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ConditionKillUnproven, "a retired unit is not proven gone")
	case uncertain != nil:
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ConditionStartUncertain, "a start may or may not have run")
	case inst.Spec.Suspend && reconciling:
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSuspended, n.msg)
	case inst.Spec.Suspend:
		// Suspended is a desired state reached: kstatus (and so Flux and
		// kubectl wait) read it as current; Argo CD shows Suspended.
		set(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonSuspended, "suspended: no generation runs, as asked")
	case stalled:
		set(v1.ConditionReady, metav1.ConditionFalse, n.reason, n.msg)
	case idle && reconciling:
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonIdle, n.msg)
	case idle:
		// Asleep is a state reached, and the socket answers: the next
		// connection waits for the generation it starts.
		set(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonIdle, n.msg)
	case waking:
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonWaking, "a connection woke it; a generation is starting to answer it")
	case active == nil:
		set(v1.ConditionReady, metav1.ConditionFalse, orDefault(n.reason, v1.ReasonProgressing), orDefault(n.msg, "no generation serves yet"))
	case !ready(active):
		c := meta.FindStatusCondition(active.Status.Conditions, v1.ConditionReady)
		reason, msg := "NotReady", "the active generation is not ready"
		if c != nil {
			reason, msg = c.Reason, c.Message
		}
		set(v1.ConditionReady, metav1.ConditionFalse, reason, msg)
	case reconciling:
		set(v1.ConditionReady, metav1.ConditionFalse, n.reason, fmt.Sprintf("generation %d serves; %s", active.Spec.Number, n.msg))
	default:
		set(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonReconciled, fmt.Sprintf("generation %d serves", active.Spec.Number))
	}
}

// startUncertain is a live generation whose start may or may not have run.
func startUncertain(gens []*v1.Generation) *v1.Generation {
	for _, g := range gens {
		if !terminated(g) && meta.IsStatusConditionPresentAndEqual(g.Status.Conditions, v1.ConditionStarted, metav1.ConditionUnknown) {
			return g
		}
	}
	return nil
}

// killUnproven is a generation whose kill was attempted and not proven.
func killUnproven(gens []*v1.Generation) *v1.Generation {
	for _, g := range gens {
		if meta.IsStatusConditionFalse(g.Status.Conditions, v1.ConditionTerminated) {
			return g
		}
	}
	return nil
}

// failure says why a generation will not serve.
func failure(g *v1.Generation) string {
	for _, typ := range []string{v1.ConditionStarted, v1.ConditionReady} {
		if c := meta.FindStatusCondition(g.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return string(g.Status.Phase)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
