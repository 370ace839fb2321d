package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// exited: g ran, and its app ended on its own.
func exited(g *v1.Generation) bool {
	return g.Status.Phase == v1.PhaseFailed && g.Status.Exit != nil &&
		meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionStarted)
}

// nothingRuns: with latest retired, the Instance is left with nothing
// that serves, not by a choice to keep the old one: suspended, or the
// serving generation (latest itself, or the active one behind an aborted
// swap) ended on its own or with the node's boot. A generation with the
// template follows.
//
// Retired for idleness, it is followed only once a connection woke the
// Instance (waking): the Generation's retirement may be read before the
// Instance's idleSince, and must not start one at once.
func nothingRuns(latest, active *v1.Generation, waking bool) bool {
	switch retiredBecause(latest) {
	case RetiredSuspended, RetiredExited, RetiredRebooted:
		return true
	case RetiredIdle:
		return waking
	}
	if active == nil {
		return false
	}
	because := retiredBecause(active)
	return because == RetiredExited || because == RetiredRebooted
}

func retiredBecause(g *v1.Generation) string {
	if !g.Spec.Retired {
		return ""
	}
	return g.Annotations[AnnotationRetiredBecause]
}

// appRestartKey is the restart backoff key of the Instance's app (its
// generations), beside its sidecars' keys.
func appRestartKey(namespace, name string) string { return restartKeyPrefix(namespace, name) + "app" }

// replaceExited retires g, which ended on its own while nothing else
// serves, so that ensureLatest starts a successor with the same template,
// as a ReplicaSet replaces a Pod that failed. An app that keeps ending is
// replaced no sooner than the restart backoff allows.
func (s *instanceScope) replaceExited(ctx context.Context, g *v1.Generation) (ctrl.Result, error) {
	if goneWithBoot(g) {
		return ctrl.Result{}, s.replaceRebooted(ctx, g)
	}
	why := failure(g)
	// A command that cannot be executed is no crash: the Instance says
	// so, as the kubelet's RunContainerError, and is retried the same way.
	waitReason := v1.ReasonBackOff
	if execFailedGen(g) {
		waitReason = v1.ReasonExecFailed
	}
	if wait := s.r.restarts.wait(appRestartKey(s.inst.Namespace, s.inst.Name)); wait > 0 {
		s.note = note{reason: waitReason, reconciling: true,
			msg: fmt.Sprintf("generation %d ended (%s); its successor starts in %s", g.Spec.Number, why, wait.Round(time.Second))}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := s.r.retireGeneration(ctx, s.inst, g, RetiredExited); err != nil {
		return ctrl.Result{}, err
	}
	s.r.restarts.restarted(appRestartKey(s.inst.Namespace, s.inst.Name))
	s.r.event(s.inst, corev1.EventTypeWarning, v1.ReasonRestarting, "Restart",
		"generation %d ended (%s); a successor with the same template replaces it", g.Spec.Number, why)
	s.progress(v1.ReasonRestarting, "generation %d ended (%s); a successor with the same template replaces it", g.Spec.Number, why)
	return ctrl.Result{}, nil
}

// replaceRebooted retires g, which the node's reboot ended, so that a
// successor with the same template starts at once: a reboot is no crash
// of the app, so it neither waits out nor feeds the restart backoff.
func (s *instanceScope) replaceRebooted(ctx context.Context, g *v1.Generation) error {
	if err := s.r.retireGeneration(ctx, s.inst, g, RetiredRebooted); err != nil {
		return err
	}
	s.progress(v1.ReasonRestarting, "generation %d ended with the node's reboot; a successor with the same template replaces it", g.Spec.Number)
	return nil
}
