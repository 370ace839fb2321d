package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// controllerOptions: a failed proof or start is retried with backoff from
// 1 s doubling to 30 s, many objects at once: a retirement waits out its
// grace and its proof, so a node deleting hundreds of Instances would
// otherwise prove them a few at a time.
func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers, RateLimiter: APIBackoff()}
}

// workers is how many objects of a kind a node reconciles at once.
const workers = 16

// APIBackoff is the wait after each failed reconcile of an object in a
// row: 1 s, doubling, at most 30 s, for as long as the failures last.
func APIBackoff() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 30*time.Second)
}

// recordEvent emits an event on obj through rec; a reconciler set up
// without a recorder records nothing.
func recordEvent(rec events.EventRecorder, obj client.Object, typ, reason, action, note string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// exitStatus is the API's word for an exit the runtime recorded.
func exitStatus(e *outcome.Exit) *v1.ExitStatus {
	if e == nil {
		return nil
	}
	s := &v1.ExitStatus{}
	if e.Signal != 0 {
		s.Signal = unix.SignalName(unix.Signal(e.Signal))
	} else {
		code := int32(e.Code)
		s.Code = &code
	}
	if !e.At.IsZero() {
		at := metav1.NewTime(e.At)
		s.At = &at
	}
	return s
}

func describeExit(e *outcome.Exit) string {
	if e.Signal != 0 {
		return fmt.Sprintf("killed by %s (%s)", unix.SignalName(unix.Signal(e.Signal)), e.Result)
	}
	return fmt.Sprintf("exit code %d (%s)", e.Code, e.Result)
}

func readinessOf(t *v1.Template) node.Readiness {
	r := node.Readiness{Timeout: 2 * time.Second}
	if t.Readiness != nil && t.Readiness.HTTPGet != nil {
		r.HTTPPath = t.Readiness.HTTPGet.Path
		if r.HTTPPath == "" {
			r.HTTPPath = "/"
		}
	}
	return r
}

func readinessTimeout(t *v1.Template) time.Duration {
	if t.Readiness != nil && t.Readiness.TimeoutSeconds > 0 {
		return time.Duration(t.Readiness.TimeoutSeconds) * time.Second
	}
	return 30 * time.Second
}

// truncate keeps a condition message within the API's limit.
func truncate(s string) string {
	const max = 32 * 1024
	if len(s) > max {
		return s[:max]
	}
	return s
}

func joinErr(a, b error) error { return errors.Join(a, b) }

// nodeRuntime is node.Runtime, named here so tests can hand in a fake.
type nodeRuntime = node.Runtime

func exitText(e *outcome.Exit) string {
	if e == nil {
		return "no exit record"
	}
	return describeExit(e)
}

// statusWriteBudget bounds a reconcile's final status write, which runs
// on a context of its own (writeContext).
const statusWriteBudget = 5 * time.Second

// writeContext is for the status write that ends a reconcile: not
// cancelled with ctx, as at the agent's SIGTERM the manager cancels every
// reconcile's context, and a kill proof cut short by that shutdown must
// still be reported (KillUnproven) before the agent goes. Bounded, so the
// agent still stops within its graceful shutdown (the proofs' 15 s budget,
// then this).
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), statusWriteBudget)
}

// patchStatus sends obj's status as a merge patch from before, only when
// it changed: a reconcile that learned nothing new (a periodic look at a
// settled generation) makes no request. A vanished object is no error.
func patchStatus(ctx context.Context, c client.Client, obj, before client.Object, changed bool) error {
	if !changed {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
