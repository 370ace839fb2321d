// Package watchfilter holds the watch predicates both sides share.
package watchfilter

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// OnlyDeletes passes a watch's delete events only: a holder's deletion is
// what frees what it held (a host's claim).
var OnlyDeletes = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
