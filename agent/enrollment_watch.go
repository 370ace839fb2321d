package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// approvalWatch wakes the joining loop as soon as the node's Enrollment
// changes its spec (an approval given or taken back) or goes away, rather
// than at the next poll. The poll stays: a watch can break, and the
// guard's checks change with no event at all. Status writes (the loop's
// own reports) leave the generation alone and wake nothing.
type approvalWatch struct {
	client client.WithWatch
	node   string
	clock  clock.Clock
	log    logr.Logger
	// wake holds at most one pending wake-up: the loop reads the
	// Enrollment afresh anyway.
	wake chan struct{}
}

func newApprovalWatch(c client.WithWatch, node string, clk clock.Clock, log logr.Logger) *approvalWatch {
	return &approvalWatch{client: c, node: node, clock: clk, log: log, wake: make(chan struct{}, 1)}
}

// run watches until ctx ends, watching again after a break with the API
// backoff (reset once a watch has lasted a minute).
func (w *approvalWatch) run(ctx context.Context) {
	bo := apiBackoff()
	for {
		began := w.clock.Now()
		err := w.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if w.clock.Since(began) >= time.Minute {
			bo = apiBackoff()
		}
		wait := bo.Step()
		w.log.V(1).Info("approval watch ended; watching again", "reason", fmt.Sprint(err), "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(wait):
		}
	}
}

// once runs one watch of the node's Enrollment until it ends.
func (w *approvalWatch) once(ctx context.Context) error {
	wi, err := w.client.Watch(ctx, &hostingv1alpha1.EnrollmentList{}, client.MatchingFields{"metadata.name": w.node})
	if err != nil {
		return err
	}
	defer wi.Stop()
	// A new watch opens with the Enrollment as it is (a synthetic Added):
	// one wake-up, in case a change fell between two watches.
	seen := int64(-1)
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		case watch.Deleted:
			seen = -1
			w.poke()
		case watch.Added, watch.Modified:
			enr, ok := ev.Object.(*hostingv1alpha1.Enrollment)
			if ok && enr.Generation != seen {
				seen = enr.Generation
				w.poke()
			}
		}
	}
	return nil
}

func (w *approvalWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
