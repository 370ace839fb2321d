package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/metrics"
	"github.com/unitlet/unitlet/runtime/node"
)

// note is what a reconcile learned that status should say, beyond what
// the Generations' own conditions tell.
type note struct {
	reason, msg string
	reconciling bool // work under way: a swap, a retirement, a deletion
	stalled     bool // cannot progress without a change to the spec
	unproven    bool // a role's kill is not proven (reason in reason)
}

// swap holds one reconcile of an Instance and its Generations.
type swap struct {
	r    *InstanceReconciler
	inst *v1.Instance
	gens []*v1.Generation
	note note
}

func (s *swap) ref() node.InstanceRef {
	return node.InstanceRef{Namespace: s.inst.Namespace, Name: s.inst.Name}
}

func (s *swap) latest() *v1.Generation {
	if len(s.gens) == 0 {
		return nil
	}
	return s.gens[len(s.gens)-1]
}

func (s *swap) number(n int64) *v1.Generation {
	for _, g := range s.gens {
		if g.Spec.Number == n {
			return g
		}
	}
	return nil
}

func (s *swap) progress(reason, format string, args ...any) {
	s.note = note{reason: reason, msg: fmt.Sprintf(format, args...), reconciling: true}
}

// retireAll marks every Generation retired and reports whether all of
// them are proven gone.
func (s *swap) retireAll(ctx context.Context, because string) (bool, error) {
	gone := true
	for _, g := range s.gens {
		if err := s.r.retireGeneration(ctx, s.inst, g, because); err != nil {
			return false, err
		}
		gone = gone && terminated(g)
	}
	return gone, nil
}

// ensureLatest makes Generation n+1 when the template changed (or the
// Instance resumes). Replace proves every older generation gone first;
// Overlap raises the parent limit before the successor can start.
func (s *swap) ensureLatest(ctx context.Context) error {
	hash := templateHash(&s.inst.Spec.Template)
	latest := s.latest()
	active := s.number(s.inst.Status.ActiveGeneration)
	if latest != nil && latest.Annotations[AnnotationTemplateHash] == hash && !(latest.Spec.Retired && nothingRuns(latest, active)) {
		return nil
	}
	var next int64 = 1
	if latest != nil {
		next = latest.Spec.Number + 1
	}
	switch {
	case s.inst.Spec.Strategy == v1.StrategyReplace:
		gone, err := s.retireAll(ctx, RetiredSuperseded)
		if err != nil {
			return err
		}
		if !gone {
			s.progress(v1.ReasonSwapping, "generation %d waits until every older generation is proven gone", next)
			return errWait
		}
	case active != nil && !active.Spec.Retired:
		parent := overlapTier(s.inst, s.inst.Spec.Template.Tier)
		if err := s.r.Runtime.RaiseParent(ctx, s.ref(), parent); err != nil {
			return fmt.Errorf("raise parent limit for the overlap: %w", err)
		}
	}
	g, err := s.r.createGeneration(ctx, s.inst, next)
	if err != nil {
		return err
	}
	s.gens = append(s.gens, g)
	return nil
}

// errWait: nothing failed, the reconcile waits for a Generation to move.
var errWait = fmt.Errorf("waiting")

// advance moves the swap on: retire what is neither active nor latest,
// abort a failed successor, promote a ready one.
func (s *swap) advance(ctx context.Context) (ctrl.Result, error) {
	latest := s.latest()
	active := s.number(s.inst.Status.ActiveGeneration)
	for _, g := range s.gens {
		if g != latest && g != active {
			if err := s.r.retireGeneration(ctx, s.inst, g, RetiredSuperseded); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	var sidecarWait time.Duration
	if latest.Spec.Retired {
		if active != nil && exited(active) && !active.Spec.Retired {
			// Its successor was already given up (an aborted swap) when
			// the serving one ended: replace that one too.
			return s.replaceExited(ctx, active)
		}
		if active != nil {
			var err error
			if sidecarWait, err = s.ensureSidecars(ctx); err != nil {
				return ctrl.Result{}, err
			}
		}
		if latest.Annotations[AnnotationRetiredBecause] == RetiredSwapAborted {
			s.note = note{reason: v1.ReasonSwapAborted, stalled: true,
				msg: fmt.Sprintf("generation %d failed to take over; change the template to try again", latest.Spec.Number)}
			if active != nil && terminated(latest) {
				// The overlap is over: the old generation runs alone again.
				s.restoreParent(ctx)
			}
		}
		return ctrl.Result{RequeueAfter: sidecarWait}, nil
	}
	if latest == active {
		if exited(active) {
			return s.replaceExited(ctx, active)
		}
		sidecarWait, err := s.ensureSidecars(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		res, err := s.settle(ctx)
		if sidecarWait > 0 && (res.RequeueAfter == 0 || sidecarWait < res.RequeueAfter) {
			res.RequeueAfter = sidecarWait
		}
		return res, err
	}
	if failed(latest) && active != nil && (retiredBecause(active) == RetiredExited || exited(active)) {
		// Nothing serves to fall back to (the active one ended too): one
		// more crash, not an aborted swap.
		return s.replaceExited(ctx, latest)
	}
	if failed(latest) {
		if err := s.r.retireGeneration(ctx, s.inst, latest, RetiredSwapAborted); err != nil {
			return ctrl.Result{}, err
		}
		metrics.ObserveSwap(string(s.inst.Spec.Strategy), "Aborted", s.r.Clock.Since(latest.CreationTimestamp.Time))
		s.r.event(s.inst, corev1.EventTypeWarning, v1.ReasonSwapAborted, "Swap", "generation %d failed to start; generation %d keeps serving",
			latest.Spec.Number, s.inst.Status.ActiveGeneration)
		s.note = note{reason: v1.ReasonSwapAborted, stalled: true, msg: fmt.Sprintf("generation %d failed: %s", latest.Spec.Number, failure(latest))}
		return ctrl.Result{}, nil
	}
	if !ready(latest) {
		s.progress(v1.ReasonSwapping, "waiting for generation %d to become ready", latest.Spec.Number)
		return ctrl.Result{}, nil
	}
	sock, err := s.r.Runtime.Promote(ctx, node.GenerationRef(s.inst.Namespace, s.inst.Name, uint64(latest.Spec.Number)))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("promote generation %d: %w", latest.Spec.Number, err)
	}
	metrics.ObserveSwap(string(s.inst.Spec.Strategy), "Promoted", s.r.Clock.Since(latest.CreationTimestamp.Time))
	s.inst.Status.ActiveGeneration, s.inst.Status.Socket = latest.Spec.Number, sock
	s.r.event(s.inst, corev1.EventTypeNormal, "Promoted", "Swap", "generation %d now serves %s", latest.Spec.Number, sock)
	if active != nil {
		if err := s.r.retireGeneration(ctx, s.inst, active, RetiredSuperseded); err != nil {
			return ctrl.Result{}, err
		}
		s.progress(v1.ReasonSwapping, "generation %d serves; generation %d is retiring", latest.Spec.Number, active.Spec.Number)
	}
	return ctrl.Result{}, nil
}

// settle: the latest generation serves. Once every other one is proven
// gone the parent limit comes back down from the overlap.
func (s *swap) settle(ctx context.Context) (ctrl.Result, error) {
	for _, g := range s.gens {
		if g != s.latest() && !terminated(g) {
			s.progress(v1.ReasonSwapping, "generation %d is retiring", g.Spec.Number)
			return ctrl.Result{}, nil
		}
	}
	if len(s.gens) > 1 {
		s.restoreParent(ctx)
	}
	return ctrl.Result{}, nil
}

// restoreParent lowers the parent limit back to the tier once a single
// generation runs; it is idempotent, and a failure only leaves the limit
// higher than needed, so it is logged rather than retried.
func (s *swap) restoreParent(ctx context.Context) {
	if err := s.r.Runtime.RestoreParent(ctx, s.ref()); err != nil {
		ctrl.LoggerFrom(ctx).Info("parent limit not restored", "error", err.Error())
	}
}

// suspend retires every generation and keeps the directories.
func (s *swap) suspend(ctx context.Context) (ctrl.Result, error) {
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
	s.note = note{reason: v1.ReasonSuspended, msg: "suspended: no generation runs"}
	return ctrl.Result{}, nil
}

// finalize is deletion: every generation proven gone, then the
// Generations and the node's directories removed, then the lease released.
func (s *swap) finalize(ctx context.Context) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.inst, v1.Finalizer) {
		return ctrl.Result{}, nil
	}
	gone, err := s.retireAll(ctx, RetiredDeleted)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		s.progress(v1.ReasonDeleting, "waiting for every generation to be proven gone before the lease is released")
		return ctrl.Result{}, nil
	}
	for _, g := range s.gens {
		if err := s.r.Client.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete generation %d: %w", g.Spec.Number, err)
		}
	}
	if len(s.gens) > 0 {
		s.progress(v1.ReasonDeleting, "waiting for %d generations to be deleted", len(s.gens))
		return ctrl.Result{}, nil
	}
	if gone, err := s.retireRoles(ctx); !gone || err != nil {
		return ctrl.Result{}, err
	}
	if err := s.r.Runtime.Remove(ctx, s.ref()); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove instance from the node: %w", err)
	}
	controllerutil.RemoveFinalizer(s.inst, v1.Finalizer)
	if err := s.r.Client.Update(ctx, s.inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s.r.event(s.inst, corev1.EventTypeNormal, "Released", "Delete", "every unit proven gone; lease released")
	return ctrl.Result{}, nil
}
