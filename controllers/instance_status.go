package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// instanceFacts are what an Instance's conditions are decided from, read
// once after the phases ran (Cluster API's style: facts in, conditions
// out). Each condition has its own setter, and none reads anything else.
type instanceFacts struct {
	// observed is the metadata.generation the conditions speak for.
	observed int64
	// note is what the phases noted beyond the Generations' conditions.
	note note
	// uncertain is a live generation whose start may or may not have run.
	uncertain *v1.Generation
	// unproven is a generation whose kill was attempted and not proven.
	unproven *v1.Generation
	// active is the Generation named by ActiveGeneration, unless retired.
	active *v1.Generation
	// suspend: the spec asks for no generation to run.
	suspend bool
	// idle: the Instance sleeps (IdleSince is set).
	idle bool
	// wokenAt is when a connection woke it (nil: not waking).
	wokenAt *metav1.Time
}

// stalled: the Instance cannot progress without a change to its spec.
func (f instanceFacts) stalled() bool { return f.note.stalled }

// reconciling: work is under way, or nothing serves and nothing says
// why that is the state asked for.
func (f instanceFacts) reconciling() bool {
	return f.note.reconciling || (f.active == nil && !f.suspend && !f.stalled() && !f.idle)
}

// killUnproven: a generation's or a role's kill is not proven.
func (f instanceFacts) killUnproven() bool { return f.unproven != nil || f.note.unproven }

// instanceFactsOf reads the facts of inst, its Generations and the note.
func instanceFactsOf(inst *v1.Instance, gens []*v1.Generation, n note) instanceFacts {
	f := instanceFacts{
		observed: inst.Status.ObservedGeneration, note: n,
		uncertain: startUncertain(gens), unproven: killUnproven(gens),
		suspend: inst.Spec.Suspend, idle: inst.Status.IdleSince != nil, wokenAt: inst.Status.WokenAt,
	}
	for _, g := range gens {
		if g.Spec.Number == inst.Status.ActiveGeneration && !g.Spec.Retired {
			f.active = g
		}
	}
	return f
}

// computeInstanceStatus is the one place an Instance's conditions are
// decided, from its Generations and what the reconcile noted. ok: the
// reconcile succeeded, so observedGeneration may advance. The fields the
// phases own (see instanceScope) are not touched.
func computeInstanceStatus(inst *v1.Instance, gens []*v1.Generation, n note, ok bool) {
	if ok {
		inst.Status.ObservedGeneration = inst.Generation
	}
	f := instanceFactsOf(inst, gens, n)
	// In this order: a condition new to the list is appended.
	setStartUncertain(inst, f)
	setKillUnproven(inst, f)
	setStalled(inst, f)
	setReconciling(inst, f)
	setInstanceReady(inst, f)
}

// setInstanceCondition sets one condition of inst, observed at f's generation.
func setInstanceCondition(inst *v1.Instance, f instanceFacts, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: f.observed,
	})
}

// setStartUncertain: True while a live generation's start may or may not
// have run.
func setStartUncertain(inst *v1.Instance, f instanceFacts) {
	if g := f.uncertain; g != nil {
		c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionStarted)
		setInstanceCondition(inst, f, v1.ConditionStartUncertain, metav1.ConditionTrue, c.Reason,
			fmt.Sprintf("generation %d may have run: %s", g.Spec.Number, c.Message))
		return
	}
	setInstanceCondition(inst, f, v1.ConditionStartUncertain, metav1.ConditionFalse, v1.ReasonCertain, "every start's outcome is known")
}

// setKillUnproven: True while a generation's kill, or a role's, is not
// proven. False claims no proof of its own: a retirement under way (a
// swap's old generation) is its Generation's to say.
func setKillUnproven(inst *v1.Instance, f instanceFacts) {
	switch {
	case f.unproven != nil:
		c := meta.FindStatusCondition(f.unproven.Status.Conditions, v1.ConditionTerminated)
		setInstanceCondition(inst, f, v1.ConditionKillUnproven, metav1.ConditionTrue, c.Reason,
			fmt.Sprintf("generation %d: %s", f.unproven.Spec.Number, c.Message))
	case f.note.unproven:
		setInstanceCondition(inst, f, v1.ConditionKillUnproven, metav1.ConditionTrue, f.note.reason, f.note.msg)
	default:
		setInstanceCondition(inst, f, v1.ConditionKillUnproven, metav1.ConditionFalse, v1.ReasonProven, "no kill is left unproven")
	}
}

// setStalled: present only while the Instance cannot progress without a
// change to its spec.
func setStalled(inst *v1.Instance, f instanceFacts) {
	if !f.stalled() {
		meta.RemoveStatusCondition(&inst.Status.Conditions, v1.ConditionStalled)
		return
	}
	setInstanceCondition(inst, f, v1.ConditionStalled, metav1.ConditionTrue, f.note.reason, f.note.msg)
}

// setReconciling: present only while work is under way.
func setReconciling(inst *v1.Instance, f instanceFacts) {
	if !f.reconciling() {
		meta.RemoveStatusCondition(&inst.Status.Conditions, v1.ConditionReconciling)
		return
	}
	reason, msg := f.note.reason, f.note.msg
	if reason == "" {
		reason, msg = v1.ReasonProgressing, "waiting for a generation to serve"
	}
	if f.wokenAt != nil {
		reason, msg = v1.ReasonWaking, fmt.Sprintf("woken by a connection at %s: %s", f.wokenAt.Format(time.RFC3339), msg)
	}
	setInstanceCondition(inst, f, v1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
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
