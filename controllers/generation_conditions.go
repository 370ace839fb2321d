package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// setPrepared: whether the node prepared the slot; False (and retried)
// while the envFrom or the node's preparation fails.
func setPrepared(gen *v1.Generation, v genView) {
	switch {
	case v.notOnNode != "":
	case v.keyErr != nil:
		setGenCondition(gen, v1.ConditionPrepared, metav1.ConditionFalse, keyReason(v.keyErr), "retrying: "+v.keyErr.Error())
	case v.envErr != nil:
		setGenCondition(gen, v1.ConditionPrepared, metav1.ConditionFalse, v1.ReasonEnvUnavailable, v.envErr.Error())
	case v.prepareErr != nil:
		setGenCondition(gen, v1.ConditionPrepared, metav1.ConditionFalse, v1.ReasonPrepareFailed, "retrying: "+v.prepareErr.Error())
	}
	if p := v.prepared; p != nil {
		msg := "prepared"
		if p.fresh && len(p.warnings) > 0 {
			msg = fmt.Sprintf("prepared with warnings: %v", p.warnings)
		}
		setGenCondition(gen, v1.ConditionPrepared, metav1.ConditionTrue, v1.ReasonPrepared, msg)
	}
}

// setStarted: the start's outcome, never more than the runtime proved;
// then what an exit or a kill makes of "running".
func setStarted(gen *v1.Generation, v genView) []genEvent {
	var evs []genEvent
	if v.notOnNode != "" {
		setGenCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused, v.notOnNode)
	}
	if l := v.lostAnswer; l != nil && v.start != nil {
		evs = append(evs, lostAnswerEvent(v.n, l, v.start))
	}
	if s := v.start; s != nil {
		evs = append(evs, setStartOutcome(gen, v.n, s)...)
	}
	if e := v.exit; e != nil {
		if e.ExecFailed != "" {
			setGenCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExecFailed, execFailedMsg(e))
			evs = append(evs, execFailedEvent(v.n, e))
		} else {
			// It did start; "running" is no longer so.
			reason, how := exitReason(v)
			setGenCondition(gen, v1.ConditionStarted, metav1.ConditionTrue, reason,
				fmt.Sprintf("ran as pid %d, then %s", v.mainPID, how))
			evs = append(evs, warning(reason, "Observe", "generation %d exited: %s", v.n, how))
		}
	}
	if k := v.kill; k != nil {
		// Once a kill was sent, "running" is no longer known to be so.
		if c := meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted); c != nil && c.Reason == v1.ReasonRunning {
			msg := fmt.Sprintf("ran as pid %d; asked to stop, its end not proven yet (see Terminated)", v.mainPID)
			if k.Proven {
				msg = fmt.Sprintf("ran as pid %d, then was stopped", v.mainPID)
			}
			setGenCondition(gen, v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRetired, msg)
		}
	}
	return evs
}

// lostAnswerEvent says a start's answer was lost, though a look resolved
// it before the uncertainty could be written: a fault of the node's
// manager (or its bus) that the conditions alone would never show.
func lostAnswerEvent(n int64, lost, found *outcome.Start) genEvent {
	msg := lost.Kind.String()
	if lost.Cause != nil {
		msg = lost.Cause.Error()
	}
	seen := found.Kind.String()
	if found.Kind == outcome.Running {
		seen = fmt.Sprintf("running as pid %d", found.MainPID)
	}
	return warning(lost.Kind.String(), "Start", "generation %d may have run: %s; a look then found it %s", n, msg, seen)
}

// setStartOutcome writes Started from a start's outcome learnt now.
func setStartOutcome(gen *v1.Generation, n int64, s *outcome.Start) []genEvent {
	msg := s.Kind.String()
	if s.Cause != nil {
		msg = s.Cause.Error()
	}
	switch s.Kind {
	case outcome.Running:
		// No Event for the normal path's steps (running, ready): the
		// conditions say them, and a thousand Instances' worth of
		// Events is a backlog the API server takes minutes to write.
		setGenCondition(gen, v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRunning, fmt.Sprintf("running as pid %d", s.MainPID))
		return nil
	case outcome.NotStarted:
		setGenCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused, msg)
		return []genEvent{warning(v1.ReasonLaunchRefused, "Start", "generation %d not started: %s", n, msg)}
	case outcome.ExitedBeforeObserved:
		if s.Exit != nil && s.Exit.ExecFailed != "" {
			setGenCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExecFailed, execFailedMsg(s.Exit))
			return []genEvent{execFailedEvent(n, s.Exit)}
		}
		setGenCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExitedBeforeObserved, msg)
		return []genEvent{warning(v1.ReasonExitedBeforeObserved, "Start", "generation %d crashed at start: %s", n, msg)}
	default: // MayHaveRun, QueuedJobMayRun: say so, never claim either way
		setGenCondition(gen, v1.ConditionStarted, metav1.ConditionUnknown, s.Kind.String(), msg)
		return []genEvent{warning(s.Kind.String(), "Start", "generation %d may have run: %s", n, msg)}
	}
}

// setGenerationReady: the readiness probe's word, or why the generation
// will not serve (its command could not run, it exited, its start stayed
// unknown, it was retired).
func setGenerationReady(gen *v1.Generation, v genView) []genEvent {
	var evs []genEvent
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setGenCondition(gen, v1.ConditionReady, status, reason, msg)
	}
	if s := v.start; s != nil && s.Kind == outcome.ExitedBeforeObserved && s.Exit != nil && s.Exit.ExecFailed != "" {
		set(metav1.ConditionFalse, v1.ReasonExecFailed, execFailedMsg(s.Exit))
	}
	if e := v.exit; e != nil {
		if e.ExecFailed != "" {
			set(metav1.ConditionFalse, v1.ReasonExecFailed, execFailedMsg(e))
		} else {
			reason, how := exitReason(v)
			set(metav1.ConditionFalse, reason, how)
		}
	}
	if v.unresolved != "" {
		set(metav1.ConditionFalse, v1.ReasonStartUnresolved, v.unresolved)
		evs = append(evs, warning(v1.ReasonStartUnresolved, "Observe", "generation %d: %s", v.n, v.unresolved))
	}
	if p := v.probe; p != nil {
		switch {
		case p.err == nil:
			set(metav1.ConditionTrue, v1.ReasonProbeSucceeded, "readiness probe succeeded")
		case p.timedOut:
			set(metav1.ConditionFalse, v1.ReasonReadinessTimeout, fmt.Sprintf("not ready within %s: %v", p.timeout, p.err))
			evs = append(evs, warning(v1.ReasonReadinessTimeout, "Probe", "generation %d not ready within %s", v.n, p.timeout))
		default:
			set(metav1.ConditionFalse, v1.ReasonProbing, p.err.Error())
		}
	}
	if k := v.kill; k != nil && k.Proven && !failedReady(gen) {
		set(metav1.ConditionFalse, v1.ReasonRetired, "generation retired")
	}
	return evs
}

// failedReady: gen's Ready says why it never would serve (not ready in
// time, exited, not executable, its start unresolved), which its
// retirement, the consequence, must not overwrite: Terminated and the
// phase say it was retired.
func failedReady(gen *v1.Generation) bool {
	c := meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason != v1.ReasonProbing && c.Reason != v1.ReasonRetired
}

// setDrained: a superseded generation's drain before its stop.
func setDrained(gen *v1.Generation, v genView) []genEvent {
	if v.drain == nil {
		return nil
	}
	e := drainStatus(gen, v.drain, func(typ string, status metav1.ConditionStatus, reason, msg string) {
		setGenCondition(gen, typ, status, reason, msg)
	})
	if e == nil {
		return nil
	}
	return []genEvent{*e}
}

// setTerminated: a retirement's proof, or why it is not proven yet. A
// proof is an Event only for a Generation being deleted, whose status
// goes with it; otherwise Terminated keeps it, as Running and Ready keep
// the normal path's other steps (one write less per swap).
func setTerminated(gen *v1.Generation, v genView) []genEvent {
	k := v.kill
	switch {
	case k == nil:
		return nil
	case !k.Proven:
		setGenCondition(gen, v1.ConditionTerminated, metav1.ConditionFalse, string(k.Reason), k.Err().Error())
		return []genEvent{warning(v1.ConditionKillUnproven, "Retire", "generation %d kill unproven: %v", v.n, k.Err())}
	}
	setGenCondition(gen, v1.ConditionTerminated, metav1.ConditionTrue, v1.ReasonProven, "stopped; unit inactive and cgroup seen empty")
	if gen.DeletionTimestamp.IsZero() {
		return nil
	}
	return []genEvent{{typ: corev1.EventTypeNormal, reason: v1.ReasonRetired, action: "Retire", msg: fmt.Sprintf("generation %d proven gone", v.n)}}
}
