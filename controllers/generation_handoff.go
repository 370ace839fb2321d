package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// startReportDelay is how long a start this process handed off, and knows
// ran, may go unwritten while its app is probed. Most apps answer within
// it, and then one status write says Started and Ready together (not one
// for each), and the Instance promotes on that one. Meanwhile the Instance
// says it waits for the generation; an app slower than this has its start
// written, then its readiness.
const startReportDelay = 2 * time.Second

// holdsStart: s's start is this process's, certain (running), not yet in
// the status, and younger than startReportDelay. An uncertain start or a
// failed one is never held: it is written at once.
func (r *GenerationReconciler) holdsStart(s *generationScope) bool {
	if st := s.facts.start; st == nil || st.Kind != outcome.Running || s.facts.lostAnswer != nil ||
		meta.FindStatusCondition(s.gen.Status.Conditions, v1.ConditionStarted) != nil {
		return false
	}
	h, ok := r.handedOff.Load(s.gen.UID)
	return ok && r.Clock.Since(h.(handoff).at) < startReportDelay
}

// resolved replaces an uncertain start this process handed off with what
// a look found, so a reconcile reading a cache older than that write
// re-applies the look's outcome, not the uncertainty.
func (r *GenerationReconciler) resolved(uid types.UID, start outcome.Start) {
	if prev, ok := r.handedOff.Load(uid); ok {
		h := prev.(handoff)
		h.start = start
		r.handedOff.Store(uid, h)
	}
}

// handoff is a start this process handed to the runtime, and when.
type handoff struct {
	start outcome.Start
	at    time.Time
	// prepared is what the start made on the node (unit, cgroup), which
	// a start never reported must still write.
	prepared preparedFact
}

// minProbeWait is the first wait between readiness probes.
const minProbeWait = 10 * time.Millisecond

// probeWait is the wait before the next readiness probe: short while the
// app is fresh, since most bind their socket within milliseconds and a
// whole ProbeInterval would be most of their apply→Ready, then growing to
// ProbeInterval (half the time since the start, so a slow app costs a
// few probes more, not a busy loop).
func (r *GenerationReconciler) probeWait(uid types.UID) time.Duration {
	h, ok := r.handedOff.Load(uid)
	if !ok {
		return r.ProbeInterval // started before this process: no longer fresh
	}
	return min(r.ProbeInterval, max(minProbeWait, r.Clock.Since(h.(handoff).at)/2))
}
