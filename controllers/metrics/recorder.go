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
	knownPhases = []v1alpha1.GenerationPhase{
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

	mu sync.Mutex
	// conditions: the status each condition type's series has, only for
	// Instances that have one (an Instance in its normal state costs
	// nothing here).
	conditions map[instanceKey]map[string]metav1.ConditionStatus
	phases     map[string]bool   // phases with a series beyond knownPhases
	modes      map[string]bool   // modes with a series beyond knownModes
	info       prometheus.Labels // the agent_info series, once set
}

// newRecorder makes collectors, registers them on reg and gives the
// fixed label values their zero series.
func newRecorder(reg prometheus.Registerer) (*recorder, error) {
	r := &recorder{
		c:          newCollectors(),
		conditions: map[instanceKey]map[string]metav1.ConditionStatus{},
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

// setInstanceConditions keeps a series only for a condition away from its
// normal status, and one for suspended only while it is: absent means
// normal. Scrapes do not take r.mu, so the order of writes is what one
// can see: a status that changes has its new series set before the old
// one goes (never seen as normal meanwhile), and suspended is set before
// and deleted after the conditions (a suspending Instance's Ready=False
// is never seen without it).
func (r *recorder) setInstanceConditions(namespace, name string, conds []metav1.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	suspended := false
	for _, cond := range conds {
		if cond.Type == v1alpha1.ConditionReady && cond.Reason == v1alpha1.ReasonSuspended {
			suspended = true
		}
	}
	if suspended {
		r.c.instanceSuspended.WithLabelValues(namespace, name).Set(1)
	}
	key := instanceKey{namespace, name}
	had := r.conditions[key]
	var now map[string]metav1.ConditionStatus
	for _, cond := range conds {
		status := cond.Status
		if status != metav1.ConditionTrue && status != metav1.ConditionFalse {
			status = metav1.ConditionUnknown // the API allows only the three
		}
		// A type with no known normal status keeps its series whatever
		// it says: nothing is hidden for want of knowing what it means.
		if normal, ok := v1alpha1.InstanceConditionNormal(cond.Type); ok && status == normal {
			continue
		}
		if now == nil {
			now = map[string]metav1.ConditionStatus{}
		}
		now[cond.Type] = status
		r.c.instanceCondition.WithLabelValues(namespace, name, cond.Type, string(status)).Set(1)
	}
	// Back to normal, another status, or gone from the Instance.
	for t, s := range had {
		if now[t] != s {
			r.c.instanceCondition.DeleteLabelValues(namespace, name, t, string(s))
		}
	}
	if now == nil {
		delete(r.conditions, key)
	} else {
		r.conditions[key] = now
	}
	if !suspended {
		r.c.instanceSuspended.DeleteLabelValues(namespace, name)
	}
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
