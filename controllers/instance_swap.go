package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/node"
)

// ensureLatest makes Generation n+1 when the template changed (or the
// Instance resumes, or what served ended). Replace proves every older
// generation gone first; Overlap raises the parent limit before the
// successor can start.
func (r *InstanceReconciler) ensureLatest(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	f := s.swapFacts()
	d := decideSwap(f)
	next := s.nextNumber()
	switch d.action {
	case swapRetireAll:
		if _, err := s.retireAll(ctx, RetiredSuperseded); err != nil {
			return ctrl.Result{}, err
		}
		s.progress(v1.ReasonSwapping, "generation %d waits until every older generation is proven gone", next)
		s.done = true // a Generation's change wakes us
		return ctrl.Result{}, nil
	case swapCreate:
		if s.inst.Status.KeyFingerprint == "" {
			s.note = note{reason: v1.ReasonInstanceKeyUnavailable, reconciling: true,
				msg: fmt.Sprintf("generation %d waits for the instance key (status.keyFingerprint)", next)}
			s.done = true // the key's status write wakes us
			return ctrl.Result{}, nil
		}
		if d.raise {
			parent := overlapTier(s.inst, s.inst.Spec.Template.Tier)
			if err := r.Runtime.RaiseParent(ctx, s.ref(), parent); err != nil {
				return ctrl.Result{}, fmt.Errorf("raise parent limit for the overlap: %w", err)
			}
		}
		g, err := r.createGeneration(ctx, s.inst, next)
		if err != nil {
			return ctrl.Result{}, err
		}
		if g.UID != "" {
			ctrl.LoggerFrom(ctx).Info("generation created", "number", next, "cause", createCause(f))
		} else { // AlreadyExists: made by an earlier reconcile the cache had not shown
			ctrl.LoggerFrom(ctx).V(1).Info("generation made already", "number", next)
		}
		s.gens = append(s.gens, g)
	}
	return ctrl.Result{}, nil
}

// advance acts on the swap's decision: retire what is neither active nor
// latest, then replace, abort, promote, or wait.
func (r *InstanceReconciler) advance(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	d := decideSwap(s.swapFacts())
	for _, g := range d.stale {
		if err := r.retireGeneration(ctx, s.inst, g, RetiredSuperseded); err != nil {
			return ctrl.Result{}, err
		}
	}
	var sidecarWait time.Duration
	if d.sidecars {
		var err error
		if sidecarWait, err = s.ensureSidecars(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	res := ctrl.Result{RequeueAfter: sidecarWait}
	switch d.action {
	case swapReplaceExited:
		return s.replaceExited(ctx, d.target)
	case swapAborted:
		s.note = note{reason: v1.ReasonSwapAborted, stalled: true,
			msg: fmt.Sprintf("generation %d failed to take over; change the template to try again", d.target.Spec.Number)}
	case swapAbort:
		return res, s.abort(ctx, d.target)
	case swapAwaitReady:
		s.progress(v1.ReasonSwapping, "waiting for generation %d to become ready", d.target.Spec.Number)
		if wait := s.quietSwap(d.target); wait > 0 {
			s.quiet = true
			if res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = wait
			}
			return res, nil
		}
	case swapPromote:
		return res, s.promote(ctx, d.target)
	case swapAwaitRetired:
		// Nothing to say: the old generation's status says its retirement
		// (see promote).
	}
	if d.restore {
		// The overlap is over: one generation runs alone again.
		s.restoreParent(ctx)
	}
	return res, nil
}

// swapQuietMax bounds how long a swap goes unwritten while its new
// Generation says nothing (quietSwap): a backstop for a Generation
// reconciler that never gets to it.
const swapQuietMax = 5 * time.Minute

// quietSwap is how much longer the Instance's status may say nothing of
// the swap to target (0: it says it now): while the status as read is
// already taken as progressing (readAsProgressing) and target has no
// status: not started yet, or started and probed for startReportDelay.
// Then target's first write (ready: the promotion is the swap's first
// write; failed; or slow to answer) brings a reconcile that writes.
// Anything uncertain or unproven is written at once.
func (s *instanceScope) quietSwap(target *v1.Generation) time.Duration {
	if !s.readAsProgressing() || len(target.Status.Conditions) > 0 || startUncertain(s.gens) != nil || killUnproven(s.gens) != nil {
		return 0
	}
	return max(0, swapQuietMax-s.r.Clock.Since(target.CreationTimestamp.Time))
}

// readAsProgressing: kstatus (Flux), kubectl wait (since
// kubernetes/kubernetes#97408) and config/argocd/instance.lua already
// read the status as progressing, unwritten by this agent: after a
// template edit, one that settled before it, its old generation serving,
// behind on observedGeneration; or a new Instance's first status, which
// the cluster side wrote saying Reconciling (v1.AwaitingAgent: the key
// minter's or placement's), before any generation served.
func (s *instanceScope) readAsProgressing() bool {
	base := s.patchBase
	if base.Status.ObservedGeneration == 0 {
		c := meta.FindStatusCondition(base.Status.Conditions, v1.ConditionReconciling)
		return base.Status.ActiveGeneration == 0 && c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonProgressing
	}
	active := s.number(base.Status.ActiveGeneration)
	return base.Status.ObservedGeneration < s.inst.Generation && settled(base) && active != nil && ready(active)
}

// settled: inst's status says Ready and nothing under way.
func settled(inst *v1.Instance) bool {
	return meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady) &&
		meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReconciling) == nil
}

// releaseQuietMax bounds how long a deletion goes unwritten while its
// Generations stop as they should (quietRelease): a default drain (30 s)
// and kill's grace fit in it.
const releaseQuietMax = time.Minute

// quietRelease is how much longer the deleted Instance's status may say
// nothing of the deletion (0: it says it now). Its deletionTimestamp
// already says it to kstatus, kubectl wait and Argo CD, and each
// Generation's status says how its drain and kill go; most deletions end
// within the quiet, the lease let go and nothing left to write. While
// the Instance had settled: anything uncertain or unproven is written at
// once.
func (s *instanceScope) quietRelease() time.Duration {
	if !settled(s.patchBase) || startUncertain(s.gens) != nil || killUnproven(s.gens) != nil {
		return 0
	}
	return max(0, releaseQuietMax-s.r.Clock.Since(s.inst.DeletionTimestamp.Time))
}

// abort gives up latest, which failed to take over: the active one keeps
// serving, and the Instance is stalled until the template changes.
func (s *instanceScope) abort(ctx context.Context, latest *v1.Generation) error {
	if err := s.r.retireGeneration(ctx, s.inst, latest, RetiredSwapAborted); err != nil {
		return err
	}
	metrics.ObserveSwap(string(s.inst.Spec.Strategy), "Aborted", s.r.Clock.Since(latest.CreationTimestamp.Time))
	s.r.event(s.inst, corev1.EventTypeWarning, v1.ReasonSwapAborted, "Swap", "generation %d failed to start; generation %d keeps serving",
		latest.Spec.Number, s.inst.Status.ActiveGeneration)
	s.note = note{reason: v1.ReasonSwapAborted, stalled: true, msg: fmt.Sprintf("generation %d failed: %s", latest.Spec.Number, failure(latest))}
	return nil
}

// promote makes latest serve (the stable socket flipped). The one that
// served before is retired by the next reconcile (stale: neither active
// nor latest), once this status is written: activeGeneration is what an
// agent restarted in between re-fences the stable socket to, so it must
// name latest before the old one's drain and kill begin. Retired first,
// a restart in between would lead clients back to a generation being
// stopped.
//
// This write is the swap's last to the Instance: it says Ready and
// nothing under way, as a Deployment reads complete while its old pods
// terminate. The old generation's drain and proof are its own status;
// only a kill left unproven comes back here (KillUnproven).
func (s *instanceScope) promote(ctx context.Context, latest *v1.Generation) error {
	sock, err := s.r.Runtime.Promote(ctx, node.GenerationRef(s.inst.Namespace, s.inst.Name, latest.Spec.Number))
	if err != nil {
		return fmt.Errorf("promote generation %d: %w", latest.Spec.Number, err)
	}
	metrics.ObserveSwap(string(s.inst.Spec.Strategy), "Promoted", s.r.Clock.Since(latest.CreationTimestamp.Time))
	s.inst.Status.ActiveGeneration, s.inst.Status.Socket, s.inst.Status.NodeName = latest.Spec.Number, sock, s.r.NodeName
	s.woken()
	return nil
}

// restoreParent lowers the parent limit back to the serving generation's
// tier once a single generation runs; it is idempotent (the runtime skips
// a parent already there), and a failure only leaves the limit higher
// than needed, so it is logged rather than retried.
func (s *instanceScope) restoreParent(ctx context.Context) {
	serving := s.number(s.inst.Status.ActiveGeneration)
	if serving == nil {
		return
	}
	if err := s.r.Runtime.RestoreParent(ctx, s.ref(), tierOf(serving.Spec.Template.Tier)); err != nil {
		ctrl.LoggerFrom(ctx).Info("parent limit not restored", "error", err.Error())
	}
}

// suspend retires every generation and keeps the directories.
func (s *instanceScope) suspend(ctx context.Context) (ctrl.Result, error) {
	gone, err := s.retireAll(ctx, RetiredSuspended)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		s.progress(v1.ReasonSuspended, "suspending: waiting for every generation to be proven gone")
		return ctrl.Result{}, nil
	}
	if gone, err := s.retireRoles(ctx); !gone || err != nil {
		return ctrl.Result{}, err
	}
	s.inst.Status.ActiveGeneration = 0
	s.inst.Status.IdleSince, s.inst.Status.WokenAt = nil, nil // resumed, it starts at once
	s.note = note{reason: v1.ReasonSuspended, msg: "suspended: no generation runs"}
	return ctrl.Result{}, nil
}

// finalize is deletion: every Generation deleted, which retires it (the
// Generation reconciler stops it and lets its finalizer go only once it
// is proven gone), then the roles and the node's directories removed,
// then the lease released. One request per Generation, sent once: a
// Generation already being deleted is only waited for.
func (r *InstanceReconciler) finalize(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.inst, v1.Finalizer) {
		return ctrl.Result{}, nil
	}
	for _, g := range s.gens {
		if !g.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete generation %d: %w", g.Spec.Number, err)
		}
	}
	if len(s.gens) > 0 {
		// No count in the message: each Generation's end would be a
		// status write of its own, saying what the Generations say.
		s.progress(v1.ReasonDeleting, "waiting for every generation to be proven gone before the lease is released")
		if wait := s.quietRelease(); wait > 0 {
			s.quiet = true
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, nil
	}
	if res, err := s.awaitGenerationsElsewhere(ctx); err != nil || !res.IsZero() {
		return res, err
	}
	if gone, err := s.retireRoles(ctx); !gone || err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Runtime.Remove(ctx, s.ref()); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove instance from the node: %w", err)
	}
	// Its host claims are left as they are: once it is gone (the
	// finalizer below), the cluster side gives them back
	// (cluster/moves.ClaimReconciler), or an Instance of this node that
	// names the host takes one over (claimStale). Not a write of the
	// deletion's own.
	controllerutil.RemoveFinalizer(s.inst, v1.Finalizer)
	if err := r.Client.Update(ctx, s.inst); err != nil {
		s.released = apierrors.IsNotFound(err)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s.released = len(s.inst.Finalizers) == 0 // no one else's left: it is gone
	r.event(s.inst, corev1.EventTypeNormal, "Released", "Delete", "every unit proven gone; lease released")
	return ctrl.Result{}, nil
}
