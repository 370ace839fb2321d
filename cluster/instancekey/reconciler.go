package instancekey

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/instancekey"
)

// Workers is how many Instances' keys are minted at once.
const Workers = 16

// Reconciler keeps one key Secret per Instance and the Instance's
// status.keyFingerprint in step with it.
type Reconciler struct {
	// Client reads Instances and the key namespace's Secrets from the
	// manager's cache (which holds that namespace's Secrets only).
	Client client.Client
	// Reader confirms, uncached, that a key Secret is gone before saying
	// so: the cache may not hold one just made.
	Reader       client.Reader
	KeyNamespace string
	Recorder     events.EventRecorder

	// written is each Instance (by UID) this minter wrote a first
	// fingerprint to, until its cache shows one: a reconcile in between (the new
	// Secret's event wakes one) reads a version without it, and would
	// otherwise mint or write again, to fail.
	mu      sync.Mutex
	written map[types.NamespacedName]types.UID
}

// The Role in the key namespace only: no Secret elsewhere is read.
// +kubebuilder:rbac:groups="",namespace=unitlet-keys,resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances,verbs=get;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile mints, rotates or sweeps the key of one Instance.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		if apierrors.IsNotFound(err) {
			r.remember(req.NamespacedName, "")
			return ctrl.Result{}, r.sweep(ctx, req.NamespacedName, "")
		}
		return ctrl.Result{}, err
	}
	if r.behind(inst) {
		return ctrl.Result{}, nil // the fingerprint written comes back, and reconciles
	}
	// A former Instance of the same name had another UID: its key goes.
	if err := r.sweep(ctx, req.NamespacedName, instancekey.SecretName(inst.UID)); err != nil {
		return ctrl.Result{}, err
	}
	if !inst.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the key stays until the Instance is gone
	}
	// An Instance that never had a key needs no uncached look: minting
	// creates the Secret, which the API server refuses if it exists.
	secret, err := r.secret(ctx, inst, inst.Status.KeyFingerprint != "")
	if err != nil {
		return ctrl.Result{}, err
	}
	p := decide(secret, inst.Status.KeyFingerprint, inst.Annotations[v1.AnnotationRotateKey])
	switch {
	case p.lost:
		ctrl.LoggerFrom(ctx).Info("instance key Secret is gone: no generation starts until a rotation mints a new key",
			"secret", instancekey.SecretName(inst.UID))
		r.event(inst, corev1.EventTypeWarning, "InstanceKeyLost", "Mint",
			"key Secret %s/%s is gone: annotate %s to mint a new key", r.KeyNamespace, instancekey.SecretName(inst.UID), v1.AnnotationRotateKey)
		return ctrl.Result{}, nil
	case p.mint:
		if p.fingerprint, err = r.mint(ctx, inst, secret, p); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.writeStatus(ctx, inst, p.fingerprint)
}

// behind: the cache's inst has no fingerprint yet, but this minter wrote
// one to it; once it has one, what was written is forgotten.
func (r *Reconciler) behind(inst *v1.Instance) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(inst)
	uid, ok := r.written[key]
	if ok && (inst.Status.KeyFingerprint != "" || uid != inst.UID) {
		delete(r.written, key)
		return false
	}
	return ok
}

// remember records that a fingerprint was written to the Instance of
// uid at key; an empty uid forgets.
func (r *Reconciler) remember(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid == "" {
		delete(r.written, key)
		return
	}
	if r.written == nil {
		r.written = map[types.NamespacedName]types.UID{}
	}
	r.written[key] = uid
}

// secret is the Instance's key Secret, nil when there is none; with
// confirm, a missing one is confirmed uncached (it may mean a lost key).
func (r *Reconciler) secret(ctx context.Context, inst *v1.Instance, confirm bool) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: r.KeyNamespace, Name: instancekey.SecretName(inst.UID)}
	s := &corev1.Secret{}
	err := r.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) && confirm {
		err = r.Reader.Get(ctx, key, s)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("key secret %s: %w", key, err)
	}
	return s, nil
}

// mint writes a new key into the Secret (made, or replaced on the
// version read: a concurrent change is retried from a fresh read) and
// returns its fingerprint.
func (r *Reconciler) mint(ctx context.Context, inst *v1.Instance, secret *corev1.Secret, p plan) (string, error) {
	key, err := instancekey.New()
	if err != nil {
		return "", err
	}
	fp := instancekey.Fingerprint(key)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.KeyNamespace, Name: instancekey.SecretName(inst.UID)}}
	if secret != nil {
		s = secret.DeepCopy()
	}
	s.Labels = map[string]string{instancekey.LabelInstanceNamespace: inst.Namespace, v1.LabelInstance: inst.Name}
	s.Annotations = map[string]string{instancekey.AnnotationFingerprint: fp, instancekey.AnnotationRotatedFor: p.rotatedFor}
	if p.previous != "" {
		s.Annotations[instancekey.AnnotationPrevious] = p.previous
	}
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{instancekey.DataKey: key}
	verb := "rotated"
	if secret == nil {
		verb = "minted"
		err = r.Client.Create(ctx, s)
	} else {
		err = r.Client.Update(ctx, s)
	}
	if err != nil {
		return "", fmt.Errorf("key secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("instance key "+verb, "secret", s.Name, "fingerprint", fp)
	r.event(inst, corev1.EventTypeNormal, "InstanceKey", "Mint", "instance key %s (fingerprint %s)", verb, fp)
	return fp, nil
}

// writeStatus sets status.keyFingerprint. The first one is written only
// where none is yet, on the same Instance (its UID): a JSON patch that
// tests both, so the agent's writes of the new Instance (its finalizer,
// its first status), made meanwhile, do not make it fail as a lock on the
// version read did, 1.8 times per Instance in a batch of 30. A change of
// an existing one is written on the version read; a conflict is retried
// from a fresh reconcile.
func (r *Reconciler) writeStatus(ctx context.Context, inst *v1.Instance, fp string) error {
	if fp == "" || inst.Status.KeyFingerprint == fp {
		return nil
	}
	var err error
	if inst.Status.KeyFingerprint == "" {
		// The form that fits the cache's latest version first (the agent
		// may have written the first status since this reconcile read
		// it), then the other.
		latest := inst
		if cur := (&v1.Instance{}); r.Client.Get(ctx, client.ObjectKeyFromObject(inst), cur) == nil && cur.UID == inst.UID {
			latest = cur
		}
		whole := equality.Semantic.DeepEqual(latest.Status, v1.InstanceStatus{})
		if err = r.firstFingerprint(ctx, inst, fp, whole); err != nil && !apierrors.IsNotFound(err) {
			err = r.firstFingerprint(ctx, inst, fp, !whole)
		}
		if apierrors.IsInvalid(err) {
			// Both tests failed: the Instance has a fingerprint (this
			// reconcile read a cache that had not seen it) or is another
			// one now. Its change brings a reconcile of its own.
			return nil
		}
		if err == nil {
			r.remember(client.ObjectKeyFromObject(inst), inst.UID)
		}
	} else {
		patch := client.MergeFromWithOptions(inst.DeepCopy(), client.MergeFromWithOptimisticLock{})
		inst.Status.KeyFingerprint = fp
		err = r.Client.Status().Patch(ctx, inst, patch)
	}
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("instance key fingerprint: %w", err)
	}
	return nil
}

// firstFingerprint sets fp where inst (this UID) has no fingerprint yet,
// with a JSON patch that tests both; with whole, where it has no status
// at all (a missing object cannot be added to). A failed test is an
// error (Invalid, from the API server).
//
// The whole status written says Reconciling: a new Instance no one has
// written a condition to is otherwise read as done (kstatus reads a
// resource with neither observedGeneration nor conditions as Current),
// and with it the node's agent need not write "progressing" before its
// first Generation says something.
func (r *Reconciler) firstFingerprint(ctx context.Context, inst *v1.Instance, fp string, whole bool) error {
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": inst.UID}}
	if whole {
		awaiting := v1.AwaitingAgent(inst.Generation, "instance key minted")
		ops = append(ops, map[string]any{"op": "test", "path": "/status", "value": nil},
			map[string]any{"op": "add", "path": "/status", "value": map[string]any{"keyFingerprint": fp,
				"conditions": []metav1.Condition{awaiting}}})
	} else {
		ops = append(ops, map[string]any{"op": "test", "path": "/status/keyFingerprint", "value": nil},
			map[string]any{"op": "add", "path": "/status/keyFingerprint", "value": fp})
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return r.Client.Status().Patch(ctx, inst, client.RawPatch(types.JSONPatchType, b))
}

// sweep deletes the key Secrets of the Instance inst names but keep:
// cross-namespace owner references are not allowed, so a key is found by
// its Instance's labels.
func (r *Reconciler) sweep(ctx context.Context, inst types.NamespacedName, keep string) error {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.KeyNamespace), client.MatchingLabels{
		instancekey.LabelInstanceNamespace: inst.Namespace, v1.LabelInstance: inst.Name,
	}); err != nil {
		return fmt.Errorf("key secrets of %s: %w", inst, err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == keep {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete key secret %s: %w", s.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("key of a gone Instance deleted", "secret", s.Name)
	}
	return nil
}

func (r *Reconciler) event(obj *v1.Instance, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// keyInputsChanged passes an Instance's update only when something a key
// decision reads changed: its rotate-key annotation, its deletion, its
// fingerprint. The agent's own status writes (several per start, each
// read by a cache that may not have seen the fingerprint yet) do not
// wake the minter.
var keyInputsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1.Instance)
	n, ok2 := e.ObjectNew.(*v1.Instance)
	if !ok1 || !ok2 {
		return true
	}
	return o.UID != n.UID || o.Annotations[v1.AnnotationRotateKey] != n.Annotations[v1.AnnotationRotateKey] ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) || o.Status.KeyFingerprint != n.Status.KeyFingerprint
}}

// SetupWithManager watches Instances and the key Secrets, mapped to their
// Instance by label, so a Secret changed or deleted by hand is looked at.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toInstance := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ns, name := o.GetLabels()[instancekey.LabelInstanceNamespace], o.GetLabels()[v1.LabelInstance]
		if o.GetNamespace() != r.KeyNamespace || ns == "" || name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("instancekey").
		For(&v1.Instance{}, builder.WithPredicates(keyInputsChanged)).
		Watches(&corev1.Secret{}, toInstance).
		// Every new Instance waits for its key before any node starts it:
		// one worker minted a batch of 30 one after another (three
		// requests each), most of the batch's apply→Ready.
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(r)
}
