package placement

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/unitlet/unitlet/internal/nodelease"
)

// builderPredicate passes a Lease's creation and deletion, and a renewal
// only when the Lease had run out (a lost node back): the renewals of
// live nodes, every few seconds each, change no decision (the reconciles
// look again when a Lease could run out).
func builderPredicate(r *Reconciler) builder.WatchesOption {
	return builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok := e.ObjectOld.(*coordinationv1.Lease)
		if !ok {
			return true
		}
		expiry, ok := nodelease.Expiry(old)
		return !ok || !r.Clock.Now().Before(expiry)
	}})
}
