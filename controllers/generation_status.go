package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// genFacts is what one reconcile of a Generation learned. The phases only
// gather them; generationStatus alone turns them into status.
type genFacts struct {
	now time.Time
	// notOnNode: the Generation's Instance is not placed on this node.
	notOnNode string
	// envErr: the template's envFrom could not be read; nothing was
	// handed off, and the start is retried.
	envErr error
	// prepareErr: the node could not prepare the slot (a full disk, say);
	// nothing was handed off, and the start is retried.
	prepareErr error
	// prepared: the runtime prepared and was asked to start the unit now
	// (fresh), or did so earlier in this process (the start re-applied
	// from what was handed off).
	prepared *preparedFact
	// start: a start's outcome learned now: from the start call, the
	// handed-off record, or an uncertain start resolved by observation.
	start *outcome.Start
	// observed: the unit as seen now.
	observed *node.State
	// unresolved: a start whose outcome stayed unknown too long; it is
	// given up (and so retired and proven gone by the Instance).
	unresolved string
	// probe: one readiness probe and whether its timeout has passed.
	probe *probeFact
	// drain: a superseded generation's drain before its stop.
	drain *drainFact
	// kill: a retirement's proof.
	kill *outcome.Kill
	// rebooted: the node's boot ID changed since the generation was
	// recorded: a proof that nothing of it runs.
	rebooted *boot.Verdict
}

type preparedFact struct {
	fresh        bool
	unit, cgroup string
	warnings     []string
}

type probeFact struct {
	err      error
	timedOut bool
	timeout  time.Duration
}

// genEvent is an event the status change calls for.
type genEvent struct {
	typ, reason, action, msg string
	// onInstance: the event is about the Instance's swap (regarding the
	// Instance, related to the Generation).
	onInstance bool
}

// generationStatus writes gen's status from f, and returns the events
// the change calls for. It reads nothing but gen and f.
func generationStatus(gen *v1.Generation, f genFacts) []genEvent {
	st := &gen.Status
	var evs []genEvent
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: gen.Generation,
		})
	}
	emit := func(typ, reason, action, format string, args ...any) {
		evs = append(evs, genEvent{typ: typ, reason: reason, action: action, msg: fmt.Sprintf(format, args...)})
	}
	n := gen.Spec.Number
	if f.rebooted != nil {
		goneWithBootStatus(gen, *f.rebooted, set)
		return nil // one Event for the node, not one per generation
	}

	switch {
	case f.notOnNode != "":
		st.Phase = v1.PhaseFailed
		set(v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused, f.notOnNode)
	case f.envErr != nil:
		st.Phase = v1.PhasePending
		set(v1.ConditionPrepared, metav1.ConditionFalse, v1.ReasonEnvUnavailable, f.envErr.Error())
	case f.prepareErr != nil:
		st.Phase = v1.PhasePending
		set(v1.ConditionPrepared, metav1.ConditionFalse, v1.ReasonPrepareFailed, "retrying: "+f.prepareErr.Error())
	}
	if p := f.prepared; p != nil {
		msg := "prepared"
		if p.fresh {
			st.Phase = v1.PhaseStarting
			st.Unit, st.Cgroup = p.unit, p.cgroup
			if len(p.warnings) > 0 {
				msg = fmt.Sprintf("prepared with warnings: %v", p.warnings)
			}
		}
		set(v1.ConditionPrepared, metav1.ConditionTrue, v1.ReasonPrepared, msg)
	}
	if s := f.start; s != nil {
		msg := s.Kind.String()
		if s.Cause != nil {
			msg = s.Cause.Error()
		}
		switch s.Kind {
		case outcome.Running:
			now := metav1.NewTime(f.now)
			st.StartedAt = &now
			st.InvocationID, st.MainPID = s.InvocationID, int64(s.MainPID)
			// No Event for the normal path's steps (running, ready): the
			// conditions say them, and a thousand Instances' worth of
			// Events is a backlog the API server takes minutes to write.
			set(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRunning, fmt.Sprintf("running as pid %d", s.MainPID))
		case outcome.NotStarted:
			st.Phase = v1.PhaseFailed
			set(v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused, msg)
			emit(corev1.EventTypeWarning, v1.ReasonLaunchRefused, "Start", "generation %d not started: %s", n, msg)
		case outcome.ExitedBeforeObserved:
			st.Phase = v1.PhaseFailed
			st.Exit = exitStatus(s.Exit)
			if s.Exit != nil && s.Exit.ExecFailed != "" {
				execFailed(n, s.Exit, set, emit)
				break
			}
			set(v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExitedBeforeObserved, msg)
			emit(corev1.EventTypeWarning, v1.ReasonExitedBeforeObserved, "Start", "generation %d crashed at start: %s", n, msg)
		default: // MayHaveRun, QueuedJobMayRun: say so, never claim either way
			set(v1.ConditionStarted, metav1.ConditionUnknown, s.Kind.String(), msg)
			emit(corev1.EventTypeWarning, s.Kind.String(), "Start", "generation %d may have run: %s", n, msg)
		}
	}
	if o := f.observed; o != nil {
		if o.MainPID != 0 {
			st.MainPID = int64(o.MainPID) // as observed now: an adoption keeps it true
		}
		if o.Exit != nil && !o.Populated && st.Phase != v1.PhaseFailed {
			st.Phase = v1.PhaseFailed
			st.Exit = exitStatus(o.Exit)
			if o.Exit.ExecFailed != "" {
				execFailed(n, o.Exit, set, emit)
			} else {
				set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonExited, describeExit(o.Exit))
				// It did start; "running" is no longer so.
				set(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonExited, fmt.Sprintf("ran as pid %d, then %s", st.MainPID, describeExit(o.Exit)))
				emit(corev1.EventTypeWarning, v1.ReasonExited, "Observe", "generation %d exited: %s", n, describeExit(o.Exit))
			}
		}
	}
	if f.unresolved != "" {
		st.Phase = v1.PhaseFailed
		set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonStartUnresolved, f.unresolved)
		emit(corev1.EventTypeWarning, v1.ReasonStartUnresolved, "Observe", "generation %d: %s", n, f.unresolved)
	}
	if p := f.probe; p != nil {
		switch {
		case p.err == nil:
			st.Phase = v1.PhaseRunning
			set(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonProbeSucceeded, "readiness probe succeeded")
		case p.timedOut:
			st.Phase = v1.PhaseFailed
			set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonReadinessTimeout, fmt.Sprintf("not ready within %s: %v", p.timeout, p.err))
			emit(corev1.EventTypeWarning, v1.ReasonReadinessTimeout, "Probe", "generation %d not ready within %s", n, p.timeout)
		default:
			set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonProbing, p.err.Error())
		}
	}
	if d := f.drain; d != nil {
		if e := drainStatus(gen, d, set); e != nil {
			evs = append(evs, *e)
		}
	}
	if k := f.kill; k != nil {
		// Once a kill was sent, "running" is no longer known to be so.
		if c := meta.FindStatusCondition(st.Conditions, v1.ConditionStarted); c != nil && c.Reason == v1.ReasonRunning {
			msg := fmt.Sprintf("ran as pid %d; asked to stop, its end not proven yet (see Terminated)", st.MainPID)
			if k.Proven {
				msg = fmt.Sprintf("ran as pid %d, then was stopped", st.MainPID)
			}
			set(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRetired, msg)
		}
		if !k.Proven {
			if st.Phase != v1.PhaseRetired {
				st.Phase = v1.PhaseRetiring
			}
			set(v1.ConditionTerminated, metav1.ConditionFalse, string(k.Reason), k.Err().Error())
			emit(corev1.EventTypeWarning, v1.ConditionKillUnproven, "Retire", "generation %d kill unproven: %v", n, k.Err())
		} else {
			st.Phase = v1.PhaseRetired
			st.MainPID = 0
			set(v1.ConditionTerminated, metav1.ConditionTrue, v1.ReasonProven, "stopped; unit inactive and cgroup seen empty")
			set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonRetired, "generation retired")
			emit(corev1.EventTypeNormal, v1.ReasonRetired, "Retire", "generation %d proven gone", n)
		}
	}
	return evs
}

// startedStatus is the Started condition's status as f leaves it: what
// the phases branch on before the status is written.
// It is "" when nothing says yet.
func startedStatus(gen *v1.Generation, f *genFacts) metav1.ConditionStatus {
	if f.notOnNode != "" {
		return metav1.ConditionFalse
	}
	if s := f.start; s != nil {
		switch s.Kind {
		case outcome.Running:
			return metav1.ConditionTrue
		case outcome.NotStarted, outcome.ExitedBeforeObserved:
			return metav1.ConditionFalse
		}
		return metav1.ConditionUnknown
	}
	if c := meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted); c != nil {
		return c.Status
	}
	return ""
}
