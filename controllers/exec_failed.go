package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// execFailedMsg says why a command could not be executed: the app never
// ran (Started False), and the message is the exec's error with its why,
// not the trampoline's exit code.
func execFailedMsg(e *outcome.Exit) string {
	return "the command could not be executed: " + e.ExecFailed
}

// execFailedEvent is the Event for generation n's command not executed.
func execFailedEvent(n int64, e *outcome.Exit) genEvent {
	return warning(v1.ReasonExecFailed, "Start", "generation %d: %s", n, execFailedMsg(e))
}

// execFailedGen: g's command could not be executed.
func execFailedGen(g *v1.Generation) bool {
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionStarted)
	return c != nil && c.Reason == v1.ReasonExecFailed
}
