package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/instancekey"
)

// The agents' only right in the key namespace: get one Secret by name,
// never list or watch them. It is read uncached at each start, held in
// memory for that start, and never written to the node's disk by the
// agent.
// +kubebuilder:rbac:groups="",namespace=unitlet-keys,resources=secrets,verbs=get

// keyError is a start the key gate held: reason is
// v1.ReasonInstanceKeyUnavailable or v1.ReasonInstanceKeyMismatch.
type keyError struct {
	reason string
	err    error
}

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

func keyUnavailable(format string, args ...any) *keyError {
	return &keyError{reason: v1.ReasonInstanceKeyUnavailable, err: fmt.Errorf(format, args...)}
}

// keyReason is err's gate reason, "" when err is not the key gate's.
func keyReason(err error) string {
	var ke *keyError
	if errors.As(err, &ke) {
		return ke.reason
	}
	return ""
}

// readKey GETs inst's key Secret from keyNS through r (uncached): the
// key and the Secret's annotations (what the cluster side recorded).
func readKey(ctx context.Context, r client.Reader, keyNS string, inst *v1.Instance) ([]byte, map[string]string, error) {
	name := types.NamespacedName{Namespace: keyNS, Name: instancekey.SecretName(inst.UID)}
	var s corev1.Secret
	switch err := r.Get(ctx, name, &s); {
	case apierrors.IsNotFound(err):
		return nil, nil, keyUnavailable("instance key: Secret %s not found (not minted yet, or deleted: annotate %s to mint a new one)", name, v1.AnnotationRotateKey)
	case err != nil:
		return nil, nil, keyUnavailable("instance key: Secret %s: %w", name, err)
	}
	key := s.Data[instancekey.DataKey]
	if len(key) == 0 {
		return nil, nil, keyUnavailable("instance key: Secret %s holds no %q", name, instancekey.DataKey)
	}
	return key, s.Annotations, nil
}

// generationKey is the key gen starts with: read now, it must have the
// fingerprint gen was made with, which must be its predecessor's or a
// rotation the key Secret records from it. A generation made before
// instance keys (no fingerprint) starts without one.
func (r *GenerationReconciler) generationKey(ctx context.Context, inst *v1.Instance, gen *v1.Generation) (string, error) {
	want := gen.Spec.KeyFingerprint
	if want == "" {
		return "", nil
	}
	key, annotations, err := readKey(ctx, r.Reader, r.KeyNamespace, inst)
	if err != nil {
		return "", err
	}
	predecessor := ""
	if gen.Spec.Number > 1 {
		// Uncached: after a move the predecessor ran on another node. The
		// first generation has none: no list on a new Instance's start.
		gens, err := listGenerations(ctx, r.Reader, inst)
		if err != nil {
			return "", keyUnavailable("instance key: the previous generation: %w", err)
		}
		predecessor = predecessorFingerprint(gens, gen.Spec.Number)
	}
	if err := instancekey.Check(key, annotations, want, predecessor); err != nil {
		return "", &keyError{reason: v1.ReasonInstanceKeyMismatch, err: fmt.Errorf("instance key: %w", err)}
	}
	ctrl.LoggerFrom(ctx).V(1).Info("instance key checked", "fingerprint", want)
	return string(key), nil
}

// predecessorFingerprint is the key fingerprint of the newest generation
// numbered below n (gens oldest first), "" when there is none.
func predecessorFingerprint(gens []*v1.Generation, n int64) string {
	fp := ""
	for _, g := range gens {
		if g.Spec.Number < n {
			fp = g.Spec.KeyFingerprint
		}
	}
	return fp
}

// roleKey is the key a seed or sidecar starts with: the Instance's
// current one (status.keyFingerprint), read now.
func roleKey(ctx context.Context, r client.Reader, keyNS string, inst *v1.Instance) (string, error) {
	want := inst.Status.KeyFingerprint
	if want == "" {
		return "", keyUnavailable("instance key: not minted yet (status.keyFingerprint is empty)")
	}
	key, _, err := readKey(ctx, r, keyNS, inst)
	if err != nil {
		return "", err
	}
	if got := instancekey.Fingerprint(key); got != want {
		return "", &keyError{reason: v1.ReasonInstanceKeyMismatch,
			err: fmt.Errorf("instance key: the key read has fingerprint %.12s, the Instance's is %.12s", got, want)}
	}
	return string(key), nil
}

// awaitKey holds an Instance that has no generation until its key is
// minted: nothing of it starts without one.
func (r *InstanceReconciler) awaitKey(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	if s.inst.Status.KeyFingerprint != "" || len(s.gens) > 0 {
		return ctrl.Result{}, nil
	}
	s.note = note{reason: v1.ReasonInstanceKeyUnavailable, reconciling: true,
		msg: "waiting for the cluster side to mint the instance key (status.keyFingerprint)"}
	return s.stop(ctrl.Result{}, nil) // the status write wakes us
}
