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
	// keyErr: the instance key gate held the start (keyReason says
	// which); nothing was handed off, and the start is retried.
	keyErr error
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
	// lostAnswer: the uncertain start (its answer lost) that a look
	// resolved in the same reconcile, before the uncertainty was written.
	lostAnswer *outcome.Start
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
// the change calls for. It reads nothing but gen and f: what follows
// from them is derived once (genView), then each condition has its own
// setter, and the phase and the unit's record theirs.
func generationStatus(gen *v1.Generation, f genFacts) []genEvent {
	if f.rebooted != nil {
		goneWithBootStatus(gen, *f.rebooted, func(typ string, status metav1.ConditionStatus, reason, msg string) {
			setGenCondition(gen, typ, status, reason, msg)
		})
		return nil // one Event for the node, not one per generation
	}
	v := viewOf(gen, f)
	setGenerationPhase(gen, v)
	setGenerationRecord(gen, v)
	// In the order the facts arrive in (a condition new to the list is
	// appended, and the events keep their order).
	var evs []genEvent
	setPrepared(gen, v)
	evs = append(evs, setStarted(gen, v)...)
	evs = append(evs, setDrained(gen, v)...)
	evs = append(evs, setTerminated(gen, v)...)
	return append(evs, setGenerationReady(gen, v)...)
}

// genView is what the status setters read: the facts, and what follows
// from them and the status as it was before any setter wrote.
type genView struct {
	genFacts
	n int64 // the generation's number, for messages
	// exit is an exit observed now that ends the generation: its cgroup
	// is empty, and it had not failed already.
	exit *outcome.Exit
	// mainPID is the main process as known after this reconcile's start
	// and observation (before a proven kill clears it).
	mainPID int64
}

func viewOf(gen *v1.Generation, f genFacts) genView {
	v := genView{genFacts: f, n: gen.Spec.Number, mainPID: gen.Status.MainPID}
	if s := f.start; s != nil && s.Kind == outcome.Running {
		v.mainPID = int64(s.MainPID)
	}
	if o := f.observed; o != nil {
		if o.MainPID != 0 {
			v.mainPID = int64(o.MainPID) // as observed now: an adoption keeps it true
		}
		if o.Exit != nil && !o.Populated && startPhase(gen.Status.Phase, f) != v1.PhaseFailed {
			v.exit = o.Exit
		}
	}
	return v
}

// startPhase is the phase as the facts up to the start leave it.
func startPhase(phase v1.GenerationPhase, f genFacts) v1.GenerationPhase {
	switch {
	case f.notOnNode != "":
		phase = v1.PhaseFailed
	case f.envErr != nil, f.keyErr != nil, f.prepareErr != nil:
		phase = v1.PhasePending
	}
	if p := f.prepared; p != nil && p.fresh {
		phase = v1.PhaseStarting
	}
	if s := f.start; s != nil && (s.Kind == outcome.NotStarted || s.Kind == outcome.ExitedBeforeObserved) {
		phase = v1.PhaseFailed
	}
	return phase
}

// setGenerationPhase writes the phase: the start's, then what the
// observation, the probe and the kill make of it.
func setGenerationPhase(gen *v1.Generation, v genView) {
	st := &gen.Status
	st.Phase = startPhase(st.Phase, v.genFacts)
	if v.exit != nil || v.unresolved != "" {
		st.Phase = v1.PhaseFailed
	}
	if p := v.probe; p != nil {
		switch {
		case p.err == nil:
			st.Phase = v1.PhaseRunning
		case p.timedOut:
			st.Phase = v1.PhaseFailed
		}
	}
	if k := v.kill; k != nil {
		switch {
		case k.Proven:
			st.Phase = v1.PhaseRetired
		case st.Phase != v1.PhaseRetired:
			st.Phase = v1.PhaseRetiring
		}
	}
}

// setGenerationRecord writes what is known of the unit: its names, its
// start, its main process and its exit.
func setGenerationRecord(gen *v1.Generation, v genView) {
	st := &gen.Status
	if p := v.prepared; p != nil && p.fresh {
		st.Unit, st.Cgroup = p.unit, p.cgroup
	}
	if s := v.start; s != nil {
		switch s.Kind {
		case outcome.Running:
			now := metav1.NewTime(v.now)
			st.StartedAt = &now
			st.InvocationID = s.InvocationID
		case outcome.ExitedBeforeObserved:
			st.Exit = exitStatus(s.Exit)
		}
	}
	st.MainPID = v.mainPID
	if v.exit != nil {
		st.Exit = exitStatus(v.exit)
	}
	if k := v.kill; k != nil && k.Proven {
		st.MainPID = 0
	}
}

// setGenCondition sets one condition of gen.
func setGenCondition(gen *v1.Generation, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&gen.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: gen.Generation,
	})
}

// warning is a Warning event about the generation.
func warning(reason, action, format string, args ...any) genEvent {
	return genEvent{typ: corev1.EventTypeWarning, reason: reason, action: action, msg: fmt.Sprintf(format, args...)}
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
