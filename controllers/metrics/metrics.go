package metrics

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// std is registered on controller-runtime's registry at init: the
// manager's metrics endpoint serves it.
var std = mustRecorder()

func mustRecorder() *recorder {
	r, err := newRecorder(crmetrics.Registry)
	if err != nil {
		panic("unitlet metrics: " + err.Error())
	}
	return r
}

// SetInstanceConditions makes unitlet_instance_condition hold conds: a
// series valued 1 on its current status for each condition type away
// from its normal status (v1alpha1.InstanceConditionNormal), none for one
// that is normal or gone. unitlet_instance_suspended is 1 while Ready's
// reason is Suspended, absent otherwise.
func SetInstanceConditions(namespace, name string, conds []metav1.Condition) {
	std.setInstanceConditions(namespace, name, conds)
}

// DeleteInstance removes every series of the Instance; call it once the
// Instance is gone from the node.
func DeleteInstance(namespace, name string) { std.deleteInstance(namespace, name) }

// SetGenerationPhases sets unitlet_generations to counts by phase; a phase
// missing from counts is 0.
func SetGenerationPhases(counts map[string]int) { std.setGenerationPhases(counts) }

// ObserveStart counts a start by its outcome (an outcome.StartKind's
// String) and records how long it took to know it.
func ObserveStart(kind string, d time.Duration) { std.observeStart(kind, d) }

// ObserveKill counts a kill by proof and reason (an outcome.KillReason;
// empty for a proven kill). d is the time to the cgroup seen empty and is
// recorded only for proven kills.
func ObserveKill(proven bool, reason string, d time.Duration) { std.observeKill(proven, reason, d) }

// ObservePrepareStep records how long one prepare step took.
func ObservePrepareStep(step string, d time.Duration) { std.observePrepareStep(step, d) }

// ObserveSwap records a swap's duration by strategy (Overlap, Replace) and
// result.
func ObserveSwap(strategy, result string, d time.Duration) { std.observeSwap(strategy, result, d) }

// ObserveRun records a one-off command's end, by result (see
// NameRunDuration's help).
func ObserveRun(result string, d time.Duration) { std.observeRun(result, d) }

// ObserveDrain records how long a superseded Generation was left to
// drain, by result (DrainProven, DrainLimit).
func ObserveDrain(result string, d time.Duration) { std.observeDrain(result, d) }

// ObserveWake records how long the connection that woke an idle Instance
// waited for a generation to serve.
func ObserveWake(d time.Duration) { std.observeWake(d) }

// LogLineDropped counts one line of an Instance's output dropped because
// its log file could not take it, by reason (a logs.Drop* value).
func LogLineDropped(namespace, name, reason string) { std.logLineDropped(namespace, name, reason) }

// SetMode makes mode (ModeJoining or ModeHosting) the one at 1.
func SetMode(mode string) { std.setMode(mode) }

// SetAgentInfo sets the unitlet_agent_info series (value 1).
func SetAgentInfo(node, version, backend string) { std.setAgentInfo(node, version, backend) }
