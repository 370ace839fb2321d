package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/controllers/statuswrite"
	"github.com/unitlet/unitlet/internal/watchfilter"
	"github.com/unitlet/unitlet/runtime/node"
)

// InstanceReconciler turns an Instance into Generations and swaps them:
// a template change makes Generation n+1; Overlap starts it beside the
// old one and flips the stable socket once it is ready; Replace proves
// the old one gone first. Its phases are methods taking an
// instanceScope, which says the status fields they own; the conditions
// are computed in one place (computeInstanceStatus, a setter per
// condition) and the status patched once, in a defer.
type InstanceReconciler struct {
	// parked sets reconciles aside until the node's adoption is over, and
	// while adoption serves the Instance first (nil: none).
	parked *parking
	Client client.Client
	// Reader reads the Secrets and ConfigMaps a seed or sidecar's envFrom
	// names, uncached (the agent caches none of them).
	Reader   client.Reader
	Runtime  node.Runtime
	NodeName string
	// KeyNamespace holds the Instances' key Secrets (instancekey).
	KeyNamespace string
	Recorder     events.EventRecorder
	Clock        clock.PassiveClock
	Gate         hostgate.Gate
	// RoleEvents wakes an Instance when its seed or sidecar changed; the
	// Generation reconciler feeds it from the runtime's events.
	RoleEvents <-chan event.TypedGenericEvent[*v1.Instance]

	// RestartBackoff spaces the restarts of a sidecar that keeps dying;
	// zero values are the kubelet's CrashLoopBackOff figures (10 s, 5 min).
	RestartBackoff Backoff

	sidecars sidecarSets // per Instance, the sidecar names last settled
	restarts *restartBackoff
	// reboot is what a reboot proved that the API is yet to be told (nil:
	// no boot record kept).
	reboot *rebootProof
	// own is the agent's last write of each Instance, read in place of a
	// cached version older than it (Client reads through it).
	own *ownWrites
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances/finalizers,verbs=update
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=hostclaims,verbs=get;list;watch;create;delete

// Reconcile reads as the list of phases an Instance goes through.
func (r *InstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	if r.parked.park(req.NamespacedName) {
		return ctrl.Result{}, nil // woken once adoption is over with it
	}
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.DeleteInstance(req.Namespace, req.Name)
			r.restarts.forget(restartKeyPrefix(req.Namespace, req.Name))
			r.own.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if inst.Spec.NodeName != r.NodeName {
		return ctrl.Result{}, nil
	}
	gens, err := r.generations(ctx, inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &instanceScope{r: r, inst: inst, gens: gens, patchBase: inst.DeepCopy()}
	defer func() {
		switch {
		case s.released:
			metrics.DeleteInstance(inst.Namespace, inst.Name)
			return // the lease is let go and the Instance is gone: no status to write
		case s.quiet:
			return
		}
		computeInstanceStatus(inst, s.statusGenerations(gens), failedNote(s.note, retErr), retErr == nil)
		wctx, cancel := writeContext(ctx)
		defer cancel()
		// Stale: not written, as the change that made it so reconciles.
		if err := statuswrite.Instance(wctx, r.Client, r.Reader, inst, s.patchBase); err != nil && !errors.Is(err, statuswrite.ErrStale) {
			retErr = joinErr(retErr, fmt.Errorf("patch instance status: %w", err))
		}
		if controllerutil.ContainsFinalizer(inst, v1.Finalizer) {
			metrics.SetInstanceConditions(inst.Namespace, inst.Name, inst.Status.Conditions)
		} else {
			metrics.DeleteInstance(inst.Namespace, inst.Name)
		}
	}()

	phases := []instancePhase{r.gateOpen, r.ensureFinalizer, r.claimHost, r.releaseFormerHosts, r.suspendIfAsked, r.sleepOrWake, r.checkIdentity,
		r.awaitKey, r.ensureSeed, r.lookElsewhere, r.ensureLatest, r.pruneHistory, r.advance, r.fallAsleepIfIdle}
	if !inst.DeletionTimestamp.IsZero() {
		phases = []instancePhase{r.finalize}
	}
	for _, phase := range phases {
		if res, err := phase(ctx, s); err != nil || !res.IsZero() || s.done {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// failedNote is n, or when the reconcile failed with nothing noted, the
// failure itself: a node that cannot take a step (a full disk, say) says
// so rather than "waiting". A conflict is only a stale read: not noted.
func failedNote(n note, err error) note {
	if err == nil || n.reason != "" || apierrors.IsConflict(err) {
		return n
	}
	return note{reason: v1.ReasonReconcileFailed, reconciling: true, msg: "retrying: " + err.Error()}
}

// gateOpen stops the reconcile while the node is not hosting.
func (r *InstanceReconciler) gateOpen(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	if r.Gate.Accepting() {
		return ctrl.Result{}, nil
	}
	s.note = note{reason: v1.ReasonFenced, msg: "node is not hosting: no new work is started"}
	return s.stop(ctrl.Result{}, nil)
}

// ensureFinalizer takes the lease, and reads the stable socket's path.
func (r *InstanceReconciler) ensureFinalizer(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.inst, v1.Finalizer) {
		if err := r.addFinalizer(ctx, s.inst); err != nil {
			return ctrl.Result{}, err
		}
		s.patchBase = s.inst.DeepCopy()
	}
	if s.servesElsewhere() {
		// A move here: the socket clients reach is the old node's until
		// this node promotes.
		return ctrl.Result{}, nil
	}
	if sock, err := r.Runtime.StableSocket(s.ref()); err == nil {
		s.inst.Status.Socket = sock
	}
	s.servingHere()
	return ctrl.Result{}, nil
}

// addFinalizer adds the lease on the version read. A conflict (the key
// minter wrote the status meanwhile, as it does to every new Instance) is
// tried again at once on the latest version, read uncached, a few times,
// rather than after a failed reconcile's backoff of a second; on another
// Instance of the name it is returned. inst ends as written.
func (r *InstanceReconciler) addFinalizer(ctx context.Context, inst *v1.Instance) error {
	for attempt := 1; ; attempt++ {
		if !controllerutil.AddFinalizer(inst, v1.Finalizer) {
			return nil
		}
		err := r.Client.Update(ctx, inst)
		if !apierrors.IsConflict(err) || attempt == finalizerAttempts {
			return err
		}
		fresh := &v1.Instance{}
		if gerr := r.Reader.Get(ctx, client.ObjectKeyFromObject(inst), fresh); gerr != nil {
			return fmt.Errorf("read the latest after a conflict: %w", gerr)
		}
		if fresh.UID != inst.UID {
			return err
		}
		fresh.DeepCopyInto(inst)
	}
}

// finalizerAttempts bounds addFinalizer's writes in one reconcile.
const finalizerAttempts = 5

// suspendIfAsked suspends instead of everything after it.
func (r *InstanceReconciler) suspendIfAsked(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	if !s.inst.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	s.done = true
	return s.suspend(ctx)
}

// generations lists the Instance's Generations, oldest first, each the
// old boot took as its status will say once written (rebootProof).
func (r *InstanceReconciler) generations(ctx context.Context, inst *v1.Instance) ([]*v1.Generation, error) {
	gens, err := cachedGenerations(ctx, r.Client, inst)
	for _, g := range gens {
		if v, ok := r.reboot.pending(g); ok {
			generationStatus(g, genFacts{rebooted: &v}) // a copy: the cache's own is untouched
		}
	}
	return gens, err
}

// listGenerations lists inst's Generations through c, oldest first.
func listGenerations(ctx context.Context, c client.Reader, inst *v1.Instance) ([]*v1.Generation, error) {
	return listGenerationsBy(ctx, c, inst, client.MatchingLabels{v1.LabelInstance: inst.Name})
}

// indexGenerationInstance indexes the cached Generations by their
// Instance: a reconcile that lists one Instance's reads those, where a
// label selector reads every Generation of the namespace (all of a
// node's, 2N in a swap of N: a quarter of the agent's CPU in make
// bench's swap).
const indexGenerationInstance = "metadata.labels." + v1.LabelInstance

// indexGenerations registers indexGenerationInstance with the manager's cache.
func indexGenerations(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1.Generation{}, indexGenerationInstance, generationInstance)
}

// generationInstance is a Generation's key in indexGenerationInstance.
func generationInstance(o client.Object) []string {
	if n := o.GetLabels()[v1.LabelInstance]; n != "" {
		return []string{n}
	}
	return nil
}

// generationFields is a Generation's fields as the cache's index has
// them, for a list's field selector matched outside the cache.
func generationFields(g *v1.Generation) fields.Set {
	return fields.Set{indexGenerationInstance: g.Labels[v1.LabelInstance]}
}

// cachedGenerations is listGenerations through the cache's index.
func cachedGenerations(ctx context.Context, c client.Reader, inst *v1.Instance) ([]*v1.Generation, error) {
	return listGenerationsBy(ctx, c, inst, client.MatchingFields{indexGenerationInstance: inst.Name})
}

func listGenerationsBy(ctx context.Context, c client.Reader, inst *v1.Instance, of client.ListOption) ([]*v1.Generation, error) {
	var list v1.GenerationList
	if err := c.List(ctx, &list, client.InNamespace(inst.Namespace), of); err != nil {
		return nil, fmt.Errorf("list generations: %w", err)
	}
	gens := make([]*v1.Generation, 0, len(list.Items))
	for i := range list.Items {
		gens = append(gens, &list.Items[i])
	}
	sort.Slice(gens, func(a, b int) bool { return gens[a].Spec.Number < gens[b].Spec.Number })
	return gens, nil
}

func (r *InstanceReconciler) event(obj client.Object, typ, reason, action, note string, args ...any) {
	recordEvent(r.Recorder, obj, typ, reason, action, note, args...)
}

// SetupWithManager watches Instances and the Generations they own.
func (r *InstanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Gate == nil {
		r.Gate = hostgate.Always{}
	}
	clk, ok := r.Clock.(clock.Clock)
	if !ok {
		clk = clock.RealClock{}
	}
	r.restarts = newRestartBackoff(cmp.Or(r.RestartBackoff.Initial, restartBackoffInitial), cmp.Or(r.RestartBackoff.Max, restartBackoffMax), clk)
	r.own = &ownWrites{}
	r.Client = &ownWritesClient{Client: r.Client, w: r.own, now: r.Clock.Now}
	if err := indexGenerations(context.Background(), mgr); err != nil {
		return err
	}
	if err := indexHost(context.Background(), mgr); err != nil {
		return fmt.Errorf("index instances by host: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.Instance{}).
		Owns(&v1.Generation{}).
		Watches(&v1.UserGrant{}, handler.EnqueueRequestsFromMapFunc(r.instancesOfGrant)).
		Watches(&v1.HostClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimants)).
		Watches(&v1.Instance{}, handler.EnqueueRequestsFromMapFunc(r.heirs), builder.WithPredicates(watchfilter.OnlyDeletes))
	if r.RoleEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.RoleEvents, &handler.TypedEnqueueRequestForObject[*v1.Instance]{}))
	}
	if r.parked != nil {
		woken := make(chan event.TypedGenericEvent[*v1.Instance], 64)
		r.parked.wake = wakeOn(woken, func(k types.NamespacedName) *v1.Instance {
			return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		})
		b = b.WatchesRawSource(source.Channel(woken, &handler.TypedEnqueueRequestForObject[*v1.Instance]{}))
	}
	return b.Named("instance").
		WithOptions(controllerOptions()).
		Complete(r)
}

// retireGeneration marks g retired (its only mutable field) and says why.
func (r *InstanceReconciler) retireGeneration(ctx context.Context, inst *v1.Instance, g *v1.Generation, because string) error {
	if g.Spec.Retired {
		return nil
	}
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.Retired = true
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	g.Annotations[AnnotationRetiredBecause] = because
	if err := r.Client.Patch(ctx, g, patch); err != nil {
		return fmt.Errorf("retire generation %d: %w", g.Spec.Number, err)
	}
	if because != RetiredSuperseded {
		// A swap's retirement is the Promoted Event's other half; any
		// other says why here.
		r.event(inst, corev1.EventTypeNormal, "Retiring", "Retire", "generation %d retired: %s", g.Spec.Number, because)
	}
	return nil
}

// createGeneration freezes the Instance's template as Generation n.
func (r *InstanceReconciler) createGeneration(ctx context.Context, inst *v1.Instance, n int64) (*v1.Generation, error) {
	g := &v1.Generation{
		ObjectMeta: metav1.ObjectMeta{
			Name: generationName(inst.Name, n), Namespace: inst.Namespace,
			Labels:      map[string]string{v1.LabelInstance: inst.Name},
			Annotations: map[string]string{AnnotationTemplateHash: templateHash(&inst.Spec.Template)},
			// The lease from the first moment: the Generation reconciler
			// need not add it with a request of its own.
			Finalizers: []string{v1.Finalizer},
		},
		Spec: v1.GenerationSpec{
			Instance: inst.Name, NodeName: inst.Spec.NodeName, Number: n, Host: inst.Spec.Host,
			KeyFingerprint: inst.Status.KeyFingerprint, Template: *inst.Spec.Template.DeepCopy(),
		},
	}
	if err := controllerutil.SetControllerReference(inst, g, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, g); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create generation %d: %w", n, err)
	}
	return g, nil // no Event: the Generation is its own record; no UID: it existed
}

// terminated: the generation's end is proven.
func terminated(g *v1.Generation) bool {
	return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated)
}

func ready(g *v1.Generation) bool {
	return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady)
}

// failed: the generation will never serve (refused, crashed at start,
// exited, or not ready in time).
func failed(g *v1.Generation) bool {
	return g.Status.Phase == v1.PhaseFailed ||
		meta.IsStatusConditionFalse(g.Status.Conditions, v1.ConditionStarted)
}
