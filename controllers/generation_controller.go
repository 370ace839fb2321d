package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/hostgate"
	"github.com/unitlet/unitlet/internal/metrics"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// GenerationReconciler runs this node's Generations: prepare → place →
// start → observe → probe, and retire → prove. Status is computed in one
// place and patched once per reconcile.
type GenerationReconciler struct {
	Client   client.Client
	Reader   client.Reader // uncached, for Secrets and ConfigMaps
	Runtime  node.Runtime
	NodeName string
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Gate     hostgate.Gate
	// Grace is how long a retiring generation gets between SIGTERM and
	// the kill.
	Grace time.Duration
	// ProbeInterval is how often a starting generation is probed.
	ProbeInterval time.Duration
	// RoleEvents receives the runtime's events about seed and sidecar
	// slots, for the Instance reconciler.
	RoleEvents chan<- event.TypedGenericEvent[*v1.Instance]

	// handedOff remembers each start this process handed to the runtime,
	// by Generation UID, so a reconcile that reads a cache older than its
	// own status patch never starts the same generation twice.
	handedOff sync.Map
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one Generation a step towards its desired state.
func (r *GenerationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	gen := &v1.Generation{}
	if err := r.Client.Get(ctx, req.NamespacedName, gen); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gen.Spec.NodeName != r.NodeName {
		return ctrl.Result{}, nil
	}
	stopping := !gen.DeletionTimestamp.IsZero() || gen.Spec.Retired
	if !stopping && !r.Gate.Accepting() {
		// Not hosting (approval withdrawn): start nothing new, keep what runs.
		return ctrl.Result{}, nil
	}

	before := gen.DeepCopy()
	defer func() {
		gen.Status.ObservedGeneration = gen.Generation
		if err := r.Client.Status().Patch(ctx, gen, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			retErr = joinErr(retErr, fmt.Errorf("patch generation status: %w", err))
		}
		r.countPhases(ctx)
	}()

	if stopping {
		return r.retire(ctx, gen)
	}
	if controllerutil.AddFinalizer(gen, v1.Finalizer) {
		if err := r.Client.Update(ctx, gen); err != nil {
			return ctrl.Result{}, err
		}
	}
	inst := r.instanceOf(ctx, gen)
	if meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted) == nil {
		if inst == nil {
			// The cache holds this node's Instances only: a Generation
			// naming one placed elsewhere (or none) is never started.
			gen.Status.Phase = v1.PhaseFailed
			r.setCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused,
				fmt.Sprintf("Instance %s/%s is not placed on node %s: a Generation starts only for an Instance of its node", gen.Namespace, gen.Spec.Instance, r.NodeName))
			return ctrl.Result{}, nil
		}
		if prev, ok := r.handedOff.Load(gen.UID); ok {
			r.setCondition(gen, v1.ConditionPrepared, metav1.ConditionTrue, "Prepared", "prepared")
			r.applyStart(gen, prev.(outcome.Start))
		} else if err := r.start(ctx, inst, gen); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.observe(ctx, gen)
}

// instanceOf is the Generation's Instance; nil when gone or not on this
// node (the cache holds this node's only).
func (r *GenerationReconciler) instanceOf(ctx context.Context, gen *v1.Generation) *v1.Instance {
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: gen.Namespace, Name: gen.Spec.Instance}, inst); err != nil {
		return nil
	}
	return inst
}

func refOf(gen *v1.Generation) node.Ref {
	return node.GenerationRef(gen.Namespace, gen.Spec.Instance, uint64(gen.Spec.Number))
}

// start prepares, places and starts the generation once, and records what
// is known of the start: never more than the runtime could prove.
func (r *GenerationReconciler) start(ctx context.Context, inst *v1.Instance, gen *v1.Generation) error {
	log := ctrl.LoggerFrom(ctx)
	t := &gen.Spec.Template
	refs, err := refEnv(ctx, r.Reader, gen.Namespace, t)
	if err != nil {
		// Nothing was handed off: proven not started, and retried.
		r.setCondition(gen, v1.ConditionPrepared, metav1.ConditionFalse, "EnvUnavailable", err.Error())
		gen.Status.Phase = v1.PhasePending
		return err
	}
	host := inst.Spec.Host
	gen.Status.Phase = v1.PhaseStarting
	began := r.Clock.Now()
	res := r.Runtime.Start(ctx, node.StartRequest{
		Ref: refOf(gen), Host: host, Command: t.Command, Args: t.Args,
		SpecEnv: specEnv(t), RefEnv: refs, WorkingDir: t.WorkingDir, User: t.User, AllowRoot: r.Gate.AllowsRoot(),
		Tier: tierOf(t.Tier), Parent: tierOf(t.Tier), Grace: r.Grace,
	})
	metrics.ObserveStart(res.Start.Kind.String(), r.Clock.Since(began))
	kv := []any{"generation", gen.Spec.Number, "outcome", res.Start.Kind.String()}
	for _, s := range res.Steps {
		kv = append(kv, s.Name, s.Duration.String())
		metrics.ObservePrepareStep(s.Name, s.Duration)
	}
	log.Info("prepared and started", kv...)
	gen.Status.Unit, gen.Status.Cgroup = res.Unit, res.Cgroup
	prepared := "prepared"
	if len(res.Warnings) > 0 {
		prepared = fmt.Sprintf("prepared with warnings: %v", res.Warnings)
	}
	r.setCondition(gen, v1.ConditionPrepared, metav1.ConditionTrue, "Prepared", prepared)
	r.handedOff.Store(gen.UID, res.Start)
	r.applyStart(gen, res.Start)
	return nil
}

// applyStart maps a start outcome to the Started condition and phase.
func (r *GenerationReconciler) applyStart(gen *v1.Generation, s outcome.Start) {
	reason := s.Kind.String()
	msg := reason
	if s.Cause != nil {
		msg = s.Cause.Error()
	}
	switch s.Kind {
	case outcome.Running:
		now := metav1.NewTime(r.Clock.Now())
		gen.Status.StartedAt = &now
		gen.Status.InvocationID, gen.Status.MainPID = s.InvocationID, int64(s.MainPID)
		r.setCondition(gen, v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRunning, fmt.Sprintf("running as pid %d", s.MainPID))
		r.event(gen, corev1.EventTypeNormal, v1.ReasonRunning, "Start", "generation %d running", gen.Spec.Number)
	case outcome.NotStarted:
		gen.Status.Phase = v1.PhaseFailed
		r.setCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonLaunchRefused, msg)
		r.event(gen, corev1.EventTypeWarning, v1.ReasonLaunchRefused, "Start", "generation %d not started: %s", gen.Spec.Number, msg)
	case outcome.ExitedBeforeObserved:
		gen.Status.Phase = v1.PhaseFailed
		gen.Status.Exit = exitStatus(s.Exit)
		r.setCondition(gen, v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonExitedBeforeObserved, msg)
		r.event(gen, corev1.EventTypeWarning, v1.ReasonExitedBeforeObserved, "Start", "generation %d crashed at start: %s", gen.Spec.Number, msg)
	default: // MayHaveRun, QueuedJobMayRun: say so, never claim either way
		r.setCondition(gen, v1.ConditionStarted, metav1.ConditionUnknown, reason, msg)
		r.event(gen, corev1.EventTypeWarning, reason, "Start", "generation %d may have run: %s", gen.Spec.Number, msg)
	}
}

// observe reads the unit and probes readiness until it is ready, has
// exited, or the readiness timeout passed.
func (r *GenerationReconciler) observe(ctx context.Context, gen *v1.Generation) (ctrl.Result, error) {
	started := meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted)
	if started.Status == metav1.ConditionFalse {
		return ctrl.Result{}, nil // failed at start: nothing runs, the Instance decides
	}
	st, err := r.Runtime.Observe(ctx, refOf(gen))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("observe generation %d: %w", gen.Spec.Number, err)
	}
	if started.Status == metav1.ConditionUnknown {
		// An uncertain start resolves only by what is seen: running, or an
		// exit record. Otherwise it stays uncertain until retired.
		switch start := st.StartOutcome(); start.Kind {
		case outcome.Running, outcome.ExitedBeforeObserved:
			r.applyStart(gen, start)
		default:
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
		started = meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted)
		if started.Status != metav1.ConditionTrue {
			return ctrl.Result{}, nil
		}
	}
	if st.MainPID != 0 {
		gen.Status.MainPID = int64(st.MainPID) // as observed now: an adoption keeps it true
	}
	if st.Exit != nil && !st.Populated {
		if gen.Status.Phase != v1.PhaseFailed {
			gen.Status.Phase = v1.PhaseFailed
			gen.Status.Exit = exitFrom(*st.Exit)
			r.setCondition(gen, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonExited, describeExit(st.Exit))
			r.event(gen, corev1.EventTypeWarning, v1.ReasonExited, "Observe", "generation %d exited: %s", gen.Spec.Number, describeExit(st.Exit))
		}
		return ctrl.Result{}, nil
	}
	if meta.IsStatusConditionTrue(gen.Status.Conditions, v1.ConditionReady) {
		return ctrl.Result{}, nil
	}
	return r.probe(ctx, gen)
}

// probe checks readiness once and decides whether to wait more.
func (r *GenerationReconciler) probe(ctx context.Context, gen *v1.Generation) (ctrl.Result, error) {
	rd := readinessOf(&gen.Spec.Template)
	err := r.Runtime.Probe(ctx, refOf(gen), rd)
	if err == nil {
		gen.Status.Phase = v1.PhaseRunning
		r.setCondition(gen, v1.ConditionReady, metav1.ConditionTrue, "ProbeSucceeded", "readiness probe succeeded")
		r.event(gen, corev1.EventTypeNormal, "Ready", "Probe", "generation %d ready", gen.Spec.Number)
		return ctrl.Result{}, nil
	}
	timeout := readinessTimeout(&gen.Spec.Template)
	if gen.Status.StartedAt != nil && r.Clock.Since(gen.Status.StartedAt.Time) > timeout {
		gen.Status.Phase = v1.PhaseFailed
		r.setCondition(gen, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonReadinessTimeout,
			fmt.Sprintf("not ready within %s: %v", timeout, err))
		r.event(gen, corev1.EventTypeWarning, v1.ReasonReadinessTimeout, "Probe", "generation %d not ready within %s", gen.Spec.Number, timeout)
		return ctrl.Result{}, nil
	}
	r.setCondition(gen, v1.ConditionReady, metav1.ConditionFalse, "Probing", err.Error())
	return ctrl.Result{RequeueAfter: r.ProbeInterval}, nil
}

// retire stops the generation and proves it gone; the finalizer (the
// lease) leaves only with the proof.
func (r *GenerationReconciler) retire(ctx context.Context, gen *v1.Generation) (ctrl.Result, error) {
	if !meta.IsStatusConditionTrue(gen.Status.Conditions, v1.ConditionTerminated) {
		if gen.Status.Phase != v1.PhaseRetired {
			gen.Status.Phase = v1.PhaseRetiring
		}
		// Always prove, even for a generation never seen started: a start
		// may have been handed off just before a crash lost its record.
		began := r.Clock.Now()
		kill := r.Runtime.Retire(ctx, refOf(gen), r.Grace)
		metrics.ObserveKill(kill.Proven, string(kill.Reason), r.Clock.Since(began))
		if !kill.Proven {
			reason := string(kill.Reason)
			r.setCondition(gen, v1.ConditionTerminated, metav1.ConditionFalse, reason, kill.Err().Error())
			r.event(gen, corev1.EventTypeWarning, v1.ConditionKillUnproven, "Retire", "generation %d kill unproven: %v", gen.Spec.Number, kill.Err())
			return ctrl.Result{}, fmt.Errorf("generation %d: %w", gen.Spec.Number, kill.Err())
		}
		gen.Status.Phase = v1.PhaseRetired
		gen.Status.MainPID = 0
		r.setCondition(gen, v1.ConditionTerminated, metav1.ConditionTrue, v1.ReasonProven, "stopped; unit inactive and cgroup seen empty")
		r.setCondition(gen, v1.ConditionReady, metav1.ConditionFalse, "Retired", "generation retired")
		r.event(gen, corev1.EventTypeNormal, "Retired", "Retire", "generation %d proven gone", gen.Spec.Number)
	}
	if !gen.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(gen, v1.Finalizer) {
		// Pruned or deleted, and proven gone: the node's files of it go
		// too. A failure leaves only files, never a process: logged, and
		// the Instance's removal takes them at the latest.
		if err := r.Runtime.Forget(ctx, refOf(gen)); err != nil {
			ctrl.LoggerFrom(ctx).Info("generation's files kept", "generation", gen.Spec.Number, "error", err.Error())
		}
	}
	if !gen.DeletionTimestamp.IsZero() && controllerutil.RemoveFinalizer(gen, v1.Finalizer) {
		if err := r.Client.Update(ctx, gen); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// countPhases publishes this node's Generations by phase, from the cache.
func (r *GenerationReconciler) countPhases(ctx context.Context) {
	var list v1.GenerationList
	if err := r.Client.List(ctx, &list); err != nil {
		return
	}
	counts := map[string]int{}
	for _, g := range list.Items {
		counts[string(g.Status.Phase)]++
	}
	metrics.SetGenerationPhases(counts)
}

func (r *GenerationReconciler) setCondition(gen *v1.Generation, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&gen.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: gen.Generation,
	})
}

func (r *GenerationReconciler) event(obj client.Object, typ, reason, action, note string, args ...any) {
	recordEvent(r.Recorder, obj, typ, reason, action, note, args...)
}

// SetupWithManager watches Generations and the runtime's unit events.
func (r *GenerationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ProbeInterval == 0 {
		r.ProbeInterval = 250 * time.Millisecond
	}
	if r.Gate == nil {
		r.Gate = hostgate.Always{}
	}
	events := make(chan event.TypedGenericEvent[*v1.Generation], 64)
	go forwardEvents(r.Runtime.Events(), events, r.RoleEvents)
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Generation{}).
		WatchesRawSource(source.Channel(events, &handler.TypedEnqueueRequestForObject[*v1.Generation]{})).
		Named("generation").
		WithOptions(controllerOptions()).
		Complete(r)
}

// forwardEvents turns runtime slot events into Generation wake-ups, and
// role slot events into Instance wake-ups when roles is set.
func forwardEvents(in <-chan node.Ref, out chan<- event.TypedGenericEvent[*v1.Generation], roles chan<- event.TypedGenericEvent[*v1.Instance]) {
	for ref := range in {
		if ref.Generation == 0 {
			if roles != nil {
				inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
				roles <- event.TypedGenericEvent[*v1.Instance]{Object: inst}
			}
			continue
		}
		g := &v1.Generation{ObjectMeta: metav1.ObjectMeta{
			Namespace: ref.Namespace, Name: generationName(ref.Name, int64(ref.Generation)),
		}}
		out <- event.TypedGenericEvent[*v1.Generation]{Object: g}
	}
}

var _ reconcile.Reconciler = &GenerationReconciler{}
