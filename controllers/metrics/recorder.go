package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Label values that always have a series, so dashboards and rates see 0
// rather than nothing before the first event.
var (
	conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	knownPhases       = []v1alpha1.GenerationPhase{
		v1alpha1.PhasePending, v1alpha1.PhasePreparing, v1alpha1.PhaseStarting, v1alpha1.PhaseRunning,
		v1alpha1.PhaseRetiring, v1alpha1.PhaseRetired, v1alpha1.PhaseFailed,
	}
	knownStartKinds = []outcome.StartKind{
		outcome.NotStarted, outcome.MayHaveRun, outcome.QueuedJobMayRun, outcome.Running, outcome.ExitedBeforeObserved,
	}
	knownKillReasons = []outcome.KillReason{
		outcome.CgroupNotEmpty, outcome.UnitActive, outcome.StopUnanswered, outcome.ProofTimedOut,
		outcome.Cancelled, outcome.NoDelegation, outcome.Permission,
	}
	knownModes = []string{ModeJoining, ModeHosting}
	// How a drain's wait ended, and how a one-off run ended (the results
	// agent/endpoint and the adoption record).
	knownDrainResults = []string{v1alpha1.ReasonDrainProven, v1alpha1.ReasonDrainLimit}
	knownRunResults   = []string{"succeeded", "failed", "interrupted", "abandoned", "notStarted", "unproven"}
)

// The agent's modes as SetMode takes them.
const (
	ModeJoining = "joining"
	ModeHosting = "hosting"
)

// Proof label values of unitlet_kills_total.
const (
	ProofProven   = "Proven"
	ProofUnproven = "Unproven"
)

type instanceKey struct{ namespace, name string }

// recorder writes collectors and remembers which label values it set, so
// a value that goes away is zeroed or deleted without a moment of absence.
type recorder struct {
	c *collectors

	mu         sync.Mutex
	conditions map[instanceKey]map[string]bool // condition types with series
	phases     map[string]bool                 // phases with a series beyond knownPhases
	modes      map[string]bool                 // modes with a series beyond knownModes
	info       prometheus.Labels               // the agent_info series, once set
}

// newRecorder makes collectors, registers them on reg and gives the
// fixed label values their zero series.
func newRecorder(reg prometheus.Registerer) (*recorder, error) {
	r := &recorder{
		c:          newCollectors(),
		conditions: map[instanceKey]map[string]bool{},
		phases:     map[string]bool{},
		modes:      map[string]bool{},
	}
	for _, col := range r.c.all() {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	for _, p := range knownPhases {
		r.c.generations.WithLabelValues(string(p)).Set(0)
	}
	for _, k := range knownStartKinds {
		r.c.starts.WithLabelValues(k.String())
	}
	r.c.kills.WithLabelValues(ProofProven, v1alpha1.ReasonProven)
	for _, res := range knownDrainResults {
		r.c.drainDuration.WithLabelValues(res)
	}
	for _, res := range knownRunResults {
		r.c.runDuration.WithLabelValues(res)
	}
	for _, reason := range knownKillReasons {
		r.c.kills.WithLabelValues(ProofUnproven, string(reason))
	}
	return r, nil
}

func (r *recorder) setInstanceConditions(namespace, name string, conds []metav1.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := instanceKey{namespace, name}
	had := r.conditions[key]
	now := make(map[string]bool, len(conds))
	suspended := 0.0
	for _, cond := range conds {
		now[cond.Type] = true
		if cond.Type == v1alpha1.ConditionReady && cond.Reason == v1alpha1.ReasonSuspended {
			suspended = 1
		}
		current := cond.Status
		if current != metav1.ConditionTrue && current != metav1.ConditionFalse {
			current = metav1.ConditionUnknown // the API allows only the three
		}
		for _, s := range conditionStatuses {
			v := 0.0
			if s == current {
				v = 1
			}
			r.c.instanceCondition.WithLabelValues(namespace, name, cond.Type, string(s)).Set(v)
		}
	}
	// A condition type the Instance no longer has is gone, not Unknown.
	for t := range had {
		if now[t] {
			continue
		}
		for _, s := range conditionStatuses {
			r.c.instanceCondition.DeleteLabelValues(namespace, name, t, string(s))
		}
	}
	r.conditions[key] = now
	r.c.instanceSuspended.WithLabelValues(namespace, name).Set(suspended)
}

func (r *recorder) deleteInstance(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conditions, instanceKey{namespace, name})
	of := prometheus.Labels{"namespace": namespace, "name": name}
	r.c.instanceCondition.DeletePartialMatch(of)
	r.c.instanceSuspended.DeletePartialMatch(of)
	r.c.logLinesDropped.DeletePartialMatch(of)
}

func (r *recorder) logLineDropped(namespace, name, reason string) {
	r.c.logLinesDropped.WithLabelValues(namespace, name, reason).Inc()
}

func (r *recorder) setGenerationPhases(counts map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range knownPhases {
		r.c.generations.WithLabelValues(string(p)).Set(float64(counts[string(p)]))
	}
	for p := range r.phases {
		r.c.generations.WithLabelValues(p).Set(float64(counts[p]))
	}
	for p, n := range counts {
		if !isKnownPhase(p) {
			r.phases[p] = true
			r.c.generations.WithLabelValues(p).Set(float64(n))
		}
	}
}

func isKnownPhase(p string) bool {
	for _, k := range knownPhases {
		if string(k) == p {
			return true
		}
	}
	return false
}

func (r *recorder) observeStart(kind string, d time.Duration) {
	r.c.starts.WithLabelValues(kind).Inc()
	r.c.startDuration.Observe(d.Seconds())
}

// observeKill counts every kill; only a proven kill has a time to empty,
// an unproven one never saw its cgroup empty.
func (r *recorder) observeKill(proven bool, reason string, d time.Duration) {
	proof := ProofUnproven
	if proven {
		proof = ProofProven
		if reason == "" {
			reason = v1alpha1.ReasonProven
		}
		r.c.killToEmpty.Observe(d.Seconds())
	}
	r.c.kills.WithLabelValues(proof, reason).Inc()
}

func (r *recorder) observePrepareStep(step string, d time.Duration) {
	r.c.prepareStep.WithLabelValues(step).Observe(d.Seconds())
}

func (r *recorder) observeDrain(result string, d time.Duration) {
	r.c.drainDuration.WithLabelValues(result).Observe(d.Seconds())
}

func (r *recorder) observeWake(d time.Duration) { r.c.wakeDuration.Observe(d.Seconds()) }

func (r *recorder) observeRun(result string, d time.Duration) {
	r.c.runDuration.WithLabelValues(result).Observe(d.Seconds())
}

func (r *recorder) observeSwap(strategy, result string, d time.Duration) {
	r.c.swapDuration.WithLabelValues(strategy, result).Observe(d.Seconds())
}

func (r *recorder) setMode(mode string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.modes[mode] = true
	for _, m := range knownModes {
		r.modes[m] = true
	}
	for m := range r.modes {
		v := 0.0
		if m == mode {
			v = 1
		}
		r.c.agentMode.WithLabelValues(m).Set(v)
	}
}

func (r *recorder) setAgentInfo(node, version, backend string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	labels := prometheus.Labels{"node": node, "version": version, "backend": backend}
	r.c.agentInfo.With(labels).Set(1)
	if r.info != nil && !sameLabels(r.info, labels) {
		r.c.agentInfo.Delete(r.info)
	}
	r.info = labels
}

func sameLabels(a, b prometheus.Labels) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
