package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// release lets a deleted generation go once proven gone: the node's files
// of it, then the finalizer (the lease).
func (r *GenerationReconciler) release(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	gen := s.gen
	if gen.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(gen, v1.Finalizer) {
		return ctrl.Result{}, nil
	}
	// A failure leaves only files, never a process: logged, and the
	// Instance's removal takes them at the latest.
	if err := r.Runtime.Forget(ctx, refOf(gen)); err != nil {
		ctrl.LoggerFrom(ctx).Info("generation's files kept", "generation", gen.Spec.Number, "error", err.Error())
	}
	controllerutil.RemoveFinalizer(gen, v1.Finalizer)
	if err := r.Client.Update(ctx, gen); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	// Proven gone and let go: never started again; gone from the API
	// unless another's finalizer is left.
	s.released = len(gen.Finalizers) == 0
	if s.released {
		r.released.Store(client.ObjectKeyFromObject(gen), gen.UID)
	}
	r.handedOff.Delete(gen.UID)
	r.draining.Delete(gen.UID)
	return ctrl.Result{}, nil
}

// letGo says whether gen is one this process already let go, read from
// a cache that has not yet seen it gone: nothing is left to do for it.
func (r *GenerationReconciler) letGo(key types.NamespacedName, gen *v1.Generation) bool {
	uid, ok := r.released.Load(key)
	if ok && uid == gen.UID {
		return true
	}
	if ok {
		r.released.Delete(key) // the name holds another Generation now
	}
	return false
}
