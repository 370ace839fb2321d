package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// defaultGenerationHistory is spec.generationHistoryLimit when an
// Instance made before the field existed has none.
const defaultGenerationHistory = 10

// pruneHistory deletes the oldest Generations that are retired and proven
// gone beyond spec.generationHistoryLimit: their record is kept for a
// while, not for ever, or a long life of template changes (or a crash
// loop) would pile them up. The active and the newest are never pruned,
// nor anything whose kill is not proven: its finalizer is a lease.
func (r *InstanceReconciler) pruneHistory(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	limit := defaultGenerationHistory
	if l := s.inst.Spec.GenerationHistoryLimit; l != nil {
		limit = int(*l)
	}
	var done []*v1.Generation // oldest first, as s.gens
	for _, g := range s.gens {
		if g != s.latest() && g.Spec.Number != s.inst.Status.ActiveGeneration &&
			g.Spec.Retired && terminated(g) && g.DeletionTimestamp.IsZero() {
			done = append(done, g)
		}
	}
	for _, g := range prunable(done, limit) {
		if err := r.Client.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("prune generation %d: %w", g.Spec.Number, err)
		}
	}
	return ctrl.Result{}, nil
}

// prunable are those of done (retired and proven gone, oldest first) to
// delete. A generation whose command could not be executed ran nothing:
// its retries (one Generation each, with the restart backoff) do not
// count against limit, or a missing binary would push the real history
// out; of them only the newest is kept, for its message. The rest keep
// the newest limit.
func prunable(done []*v1.Generation, limit int) []*v1.Generation {
	var out, real, execFailed []*v1.Generation
	for _, g := range done {
		if execFailedGen(g) {
			execFailed = append(execFailed, g)
		} else {
			real = append(real, g)
		}
	}
	out = append(out, execFailed[:max(0, len(execFailed)-1)]...)
	return append(out, real[:max(0, len(real)-limit)]...)
}
