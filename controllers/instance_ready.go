package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// setInstanceReady: True once the state asked for is reached (a ready
// generation serves, or it is suspended or asleep as asked); otherwise
// False with the first reason that holds, the most serious first.
func setInstanceReady(inst *v1.Instance, f instanceFacts) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setInstanceCondition(inst, f, v1.ConditionReady, status, reason, msg)
	}
	n, reconciling := f.note, f.reconciling()
	switch {
	case f.killUnproven():
		set(metav1.ConditionFalse, v1.ConditionKillUnproven, "a retired unit is not proven gone")
	case f.uncertain != nil:
		set(metav1.ConditionFalse, v1.ConditionStartUncertain, "a start may or may not have run")
	case f.suspend && reconciling:
		set(metav1.ConditionFalse, v1.ReasonSuspended, n.msg)
	case f.suspend:
		// Suspended is a desired state reached: kstatus (and so Flux and
		// kubectl wait) read it as current; Argo CD shows Suspended.
		set(metav1.ConditionTrue, v1.ReasonSuspended, "suspended: no generation runs, as asked")
	case f.stalled():
		set(metav1.ConditionFalse, n.reason, n.msg)
	case f.idle && reconciling:
		set(metav1.ConditionFalse, v1.ReasonIdle, n.msg)
	case f.idle:
		// Asleep is a state reached, and the socket answers: the next
		// connection waits for the generation it starts.
		set(metav1.ConditionTrue, v1.ReasonIdle, n.msg)
	case f.wokenAt != nil:
		set(metav1.ConditionFalse, v1.ReasonWaking, "a connection woke it; a generation is starting to answer it")
	default:
		setServingReady(inst, f)
	}
}

// setServingReady is Ready when nothing but the active generation
// decides it.
func setServingReady(inst *v1.Instance, f instanceFacts) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setInstanceCondition(inst, f, v1.ConditionReady, status, reason, msg)
	}
	n, active := f.note, f.active
	switch {
	case active == nil:
		set(metav1.ConditionFalse, orDefault(n.reason, v1.ReasonProgressing), orDefault(n.msg, "no generation serves yet"))
	case !ready(active):
		c := meta.FindStatusCondition(active.Status.Conditions, v1.ConditionReady)
		reason, msg := "NotReady", "the active generation is not ready"
		if c != nil {
			reason, msg = c.Reason, c.Message
		}
		set(metav1.ConditionFalse, reason, msg)
	case f.reconciling():
		set(metav1.ConditionFalse, n.reason, fmt.Sprintf("generation %d serves; %s", active.Spec.Number, n.msg))
	default:
		set(metav1.ConditionTrue, v1.ReasonReconciled, fmt.Sprintf("generation %d serves", active.Spec.Number))
	}
}
