package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// execFailed writes generation n's status for an exit whose command could
// not be executed: the app never ran (Started False), and the message is
// the exec's error with its why, not the trampoline's exit code.
func execFailed(n int64, e *outcome.Exit, set func(typ string, status metav1.ConditionStatus, reason, msg string),
	emit func(typ, reason, action, format string, args ...any)) {
	msg := "the command could not be executed: " + e.ExecFailed
	set(v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExecFailed, msg)
	set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonExecFailed, msg)
	emit(corev1.EventTypeWarning, v1.ReasonExecFailed, "Start", "generation %d: %s", n, msg)
}

// execFailedGen: g's command could not be executed.
func execFailedGen(g *v1.Generation) bool {
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionStarted)
	return c != nil && c.Reason == v1.ReasonExecFailed
}
