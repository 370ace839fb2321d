package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// GenerationReconciler runs this node's Generations: prepare → place →
// start → observe → probe, and retire → prove. Status is computed in one
// place and patched once per reconcile.
type GenerationReconciler struct {
	// parked sets reconciles aside until the node's adoption is over
	// (nil: none).
	parked   *parking
	Client   client.Client
	Reader   client.Reader // uncached, for Secrets and ConfigMaps
	Runtime  node.Runtime
	NodeName string
	// KeyNamespace holds the Instances' key Secrets (instancekey).
	KeyNamespace string
	Recorder     events.EventRecorder
	Clock        clock.PassiveClock
	Gate         hostgate.Gate
	// Grace is how long a retiring generation gets between SIGTERM and
	// the kill.
	Grace time.Duration
	// ProbeInterval is how often a starting generation is probed.
	ProbeInterval time.Duration
	// ObserveEvery is how often a running generation is looked at again
	// without an event. The runtime delivers every exit it sees, so this
	// is a backstop for a watch that could not be set up (logged as "no
	// event watch"), not how exits are learnt; a settled node must not
	// look at its thousand generations every few seconds.
	ObserveEvery time.Duration
	// RoleEvents receives the runtime's events about seed and sidecar
	// slots, for the Instance reconciler.
	RoleEvents chan<- event.TypedGenericEvent[*v1.Instance]

	// handedOff remembers each start this process handed to the runtime,
	// by Generation UID, so a reconcile that reads a cache older than its
	// own status patch never starts the same generation twice.
	handedOff sync.Map
	// draining is each drain this process began, by Generation UID: its
	// start (a condition's time has only seconds) and, once over, its end,
	// until Terminated is written.
	draining sync.Map
	// released is each Generation this process let go (its finalizer
	// removed), by key, its UID the value: a reconcile that reads a cache
	// not yet showing it gone does not send the removal again.
	released sync.Map
	// phases is each of this node's Generations' last phase, for the
	// phase gauge: one entry changed per reconcile, never a list.
	phases phaseCounts
	// reboot is what a reboot proved that the API is yet to be told (nil:
	// no boot record kept).
	reboot *rebootProof
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one Generation a step towards its desired state: a list
// of phases that gather facts, and one status computed from them
// (generationStatus) and patched once.
func (r *GenerationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	if r.parked.park(req.NamespacedName) {
		return ctrl.Result{}, nil // woken once adoption is over
	}
	gen := &v1.Generation{}
	if err := r.Client.Get(ctx, req.NamespacedName, gen); err != nil {
		if apierrors.IsNotFound(err) {
			r.phases.forget(req.NamespacedName)
			r.reboot.done(req.NamespacedName)
			r.released.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gen.Spec.NodeName != r.NodeName || r.letGo(req.NamespacedName, gen) {
		return ctrl.Result{}, nil
	}
	if v, ok := r.reboot.pending(gen); ok {
		if !terminated(gen) {
			// Gone with the node's boot, which the API is yet to be told:
			// never started or observed again, whatever it was. Until the
			// cache shows the write it stays pending, so a reconcile that
			// reads the cache as it was before never retires it on its own.
			return ctrl.Result{}, r.writeGoneWithBoot(ctx, gen, v)
		}
		r.reboot.done(req.NamespacedName)
	}
	stopping := !gen.DeletionTimestamp.IsZero() || gen.Spec.Retired
	if !stopping && goneWithBoot(gen) {
		// Ended with the node's boot: never started again, never
		// observed; the Instance replaces it and retires it.
		return ctrl.Result{}, nil
	}
	if !stopping && !r.Gate.Accepting() {
		// Not hosting (approval withdrawn): start nothing new, keep what runs.
		return ctrl.Result{}, nil
	}

	s := &generationScope{gen: gen}
	before := gen.DeepCopy()
	defer func() {
		if s.holdStart {
			return // the events and the status are the next reconcile's
		}
		wctx, cancel := writeContext(ctx)
		defer cancel()
		for _, e := range generationStatus(gen, s.facts) {
			r.emit(wctx, gen, e)
		}
		if s.released {
			return // let go and so gone: a status PATCH would only find it gone
		}
		gen.Status.ObservedGeneration = gen.Generation
		if err := patchStatus(wctx, r.Client, gen, before, !equality.Semantic.DeepEqual(before.Status, gen.Status)); err != nil {
			retErr = joinErr(retErr, fmt.Errorf("patch generation status: %w", err))
		}
		r.phases.set(req.NamespacedName, gen.Status.Phase)
	}()

	phases := []generationPhase{r.ensureFinalizer, r.start, r.observe, r.probe}
	if stopping {
		phases = []generationPhase{r.drain, r.retire, r.release}
	}
	for _, phase := range phases {
		if res, err := phase(ctx, s); err != nil || !res.IsZero() || s.done {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// generationScope is one reconcile of a Generation: the object, the facts
// its phases gathered, and whether one of them settled the reconcile.
// The phases own no status field: they only gather facts, and
// generationStatus's setters alone write the status, once, from them.
type generationScope struct {
	gen   *v1.Generation
	facts genFacts
	done  bool
	// holdStart: this reconcile writes nothing, as a certain start is
	// probed a little longer (holdsStart).
	holdStart bool
	// released: release let the lease go; the Generation is deleted.
	released bool
	// startedNow: this reconcile handed the start to the runtime (not
	// re-applied from an earlier handoff).
	startedNow bool
}

// generationPhase is one step of a Generation's reconcile. A non-zero
// result, an error or s.done ends the reconcile after it.
type generationPhase func(ctx context.Context, s *generationScope) (ctrl.Result, error)

func (r *GenerationReconciler) ensureFinalizer(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	if controllerutil.AddFinalizer(s.gen, v1.Finalizer) {
		return ctrl.Result{}, r.Client.Update(ctx, s.gen)
	}
	return ctrl.Result{}, nil
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

// unlessStopping is err, a start that handed nothing off (its key, its
// env not read; its slot not prepared), as a fact for the status; nil
// once ctx ended: a step cut short by this agent stopping says nothing of
// the input or the node, and the next agent tries it again. Written, it
// read "context canceled" on the Generation until then.
func unlessStopping(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func refOf(gen *v1.Generation) node.Ref {
	return node.GenerationRef(gen.Namespace, gen.Spec.Instance, gen.Spec.Number)
}

// start prepares, places and starts the generation once, and records what
// is known of the start: never more than the runtime could prove.
func (r *GenerationReconciler) start(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	gen := s.gen
	if meta.FindStatusCondition(gen.Status.Conditions, v1.ConditionStarted) != nil {
		return ctrl.Result{}, nil
	}
	inst := r.instanceOf(ctx, gen)
	if inst == nil {
		// A Generation naming an Instance placed elsewhere (or none) is
		// never started.
		s.facts.notOnNode = fmt.Sprintf("Instance %s/%s is not placed on node %s: a Generation starts only for an Instance of its node",
			gen.Namespace, gen.Spec.Instance, r.NodeName)
		s.done = true
		return ctrl.Result{}, nil
	}
	if prev, ok := r.handedOff.Load(gen.UID); ok {
		// Started by this process already; the cache had not caught up,
		// or the start was never reported (after a reboot the node
		// serves first): what the start learned is written again.
		h := prev.(handoff)
		s.facts.prepared, s.facts.start, s.facts.now = &h.prepared, &h.start, h.at
		return ctrl.Result{}, nil
	}
	g, err := ReadGrant(ctx, r.Client, inst.Namespace, gen.Spec.Template.User, r.NodeName)
	if err != nil {
		return ctrl.Result{}, err
	}
	key, err := r.generationKey(ctx, inst, gen)
	if err != nil {
		s.facts.keyErr = unlessStopping(ctx, err) // the gate held it: nothing was handed off, and retried
		return ctrl.Result{}, err
	}
	req, err := startRequest(ctx, r.Reader, inst, refOf(gen), &gen.Spec.Template, g)
	req.InstanceKey = key
	if err != nil {
		s.facts.envErr = unlessStopping(ctx, err) // nothing was handed off: proven not started, and retried
		return ctrl.Result{}, err
	}
	req.Command, req.Args, req.Tier, req.Grace = gen.Spec.Template.Command, gen.Spec.Template.Args, tierOf(gen.Spec.Template.Tier), r.Grace
	if gen.Spec.Host != "" {
		// The host it was made for, and claimed: the Instance's may have
		// changed since to one it does not hold.
		req.Host = gen.Spec.Host
	}
	began := r.Clock.Now()
	res := r.Runtime.Start(ctx, req)
	s.facts.now = r.Clock.Now()
	metrics.ObserveStart(res.Start.Kind.String(), s.facts.now.Sub(began))
	kv := []any{"generation", gen.Spec.Number, "outcome", res.Start.Kind.String()}
	for _, st := range res.Steps {
		kv = append(kv, st.Name, st.Duration.String())
		metrics.ObservePrepareStep(st.Name, st.Duration)
	}
	var notPrepared *node.PrepareError
	if res.Start.Kind == outcome.NotStarted && errors.As(res.Start.Cause, &notPrepared) {
		s.facts.prepareErr = unlessStopping(ctx, notPrepared) // nothing was handed off: retried
		return ctrl.Result{}, notPrepared
	}
	ctrl.LoggerFrom(ctx).Info("prepared and started", kv...)
	h := handoff{start: res.Start, at: s.facts.now,
		prepared: preparedFact{fresh: true, unit: res.Unit, cgroup: res.Cgroup, warnings: res.Warnings}}
	r.handedOff.Store(gen.UID, h)
	s.facts.prepared, s.facts.start = &h.prepared, &h.start
	s.startedNow = true
	return ctrl.Result{}, nil
}

// observe reads the unit: an uncertain start resolves only by what is
// seen (running, or an exit record), and an exit ends the generation.
func (r *GenerationReconciler) observe(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	started := startedStatus(s.gen, &s.facts)
	if started == metav1.ConditionFalse {
		s.done = true // failed at start: nothing runs, the Instance decides
		return ctrl.Result{}, nil
	}
	st, err := r.Runtime.Observe(ctx, refOf(s.gen))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("observe generation %d: %w", s.gen.Spec.Number, err)
	}
	if started == metav1.ConditionUnknown {
		start := st.StartOutcome()
		switch start.Kind {
		case outcome.Running, outcome.ExitedBeforeObserved:
			if s.startedNow {
				// Learnt uncertain in this very reconcile, never written:
				// the lost answer is still said (an Event), with what the
				// look found.
				s.facts.lostAnswer = s.facts.start
			}
			s.facts.start, s.facts.now = &start, r.Clock.Now()
			r.resolved(s.gen.UID, start)
		default:
			// Uncertain until retired: after the readiness timeout it is
			// given up, so the Instance retires it (the proof settles
			// whether anything runs) instead of waiting forever.
			limit := readinessTimeout(&s.gen.Spec.Template)
			if c := meta.FindStatusCondition(s.gen.Status.Conditions, v1.ConditionStarted); c != nil && r.Clock.Since(c.LastTransitionTime.Time) > limit {
				s.facts.unresolved = fmt.Sprintf("the start's outcome stayed unknown for %s (%s); given up: the Instance retires it, and Terminated says once nothing of it runs", limit, c.Message)
				s.done = true
				return ctrl.Result{}, nil
			}
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
		if start.Kind != outcome.Running {
			s.done = true
			return ctrl.Result{}, nil
		}
	}
	s.facts.observed = &st
	s.done = st.Exit != nil && !st.Populated
	return ctrl.Result{}, nil
}

// probe checks readiness once and decides whether to wait more.
func (r *GenerationReconciler) probe(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	gen := s.gen
	if meta.IsStatusConditionTrue(gen.Status.Conditions, v1.ConditionReady) {
		return ctrl.Result{RequeueAfter: r.ObserveEvery}, nil
	}
	err := r.Runtime.Probe(ctx, refOf(gen), readinessOf(&gen.Spec.Template))
	timeout := readinessTimeout(&gen.Spec.Template)
	startedAt := gen.Status.StartedAt
	if s.facts.start != nil && s.facts.start.Kind == outcome.Running {
		startedAt = &metav1.Time{Time: s.facts.now}
	}
	p := &probeFact{err: err, timeout: timeout}
	p.timedOut = err != nil && startedAt != nil && r.Clock.Since(startedAt.Time) > timeout
	s.facts.probe = p
	if err != nil && !p.timedOut {
		s.holdStart = r.holdsStart(s)
		return ctrl.Result{RequeueAfter: r.probeWait(gen.UID)}, nil
	}
	return ctrl.Result{}, nil
}

// retire stops the generation and proves it gone; always, even for one
// never seen started: a start may have been handed off just before a
// crash lost its record.
func (r *GenerationReconciler) retire(ctx context.Context, s *generationScope) (ctrl.Result, error) {
	if meta.IsStatusConditionTrue(s.gen.Status.Conditions, v1.ConditionTerminated) {
		return ctrl.Result{}, nil
	}
	began := r.Clock.Now()
	kill := r.Runtime.Retire(ctx, refOf(s.gen), r.Grace)
	metrics.ObserveKill(kill.Proven, string(kill.Reason), r.Clock.Since(began))
	s.facts.kill = &kill
	if !kill.Proven {
		return ctrl.Result{}, fmt.Errorf("generation %d: %w", s.gen.Spec.Number, kill.Err())
	}
	return ctrl.Result{}, nil
}

// emit records e on gen, or on its Instance with gen related.
func (r *GenerationReconciler) emit(ctx context.Context, gen *v1.Generation, e genEvent) {
	if e.reason == v1.ReasonRetired && r.instanceReleasing(ctx, gen) {
		return // the Instance's Released says every unit of it is proven gone
	}
	if e.onInstance && r.Recorder != nil {
		if inst := r.instanceOf(ctx, gen); inst != nil {
			r.Recorder.Eventf(inst, gen, e.typ, e.reason, e.action, "%s", e.msg)
			return
		}
	}
	r.event(gen, e.typ, e.reason, e.action, "%s", e.msg)
}

// instanceReleasing: gen is deleted with its Instance, which this node
// is deleting (and waits for gen's proof before its Released).
func (r *GenerationReconciler) instanceReleasing(ctx context.Context, gen *v1.Generation) bool {
	if gen.DeletionTimestamp.IsZero() {
		return false
	}
	inst := r.instanceOf(ctx, gen)
	return inst != nil && !inst.DeletionTimestamp.IsZero()
}

func (r *GenerationReconciler) event(obj client.Object, typ, reason, action, note string, args ...any) {
	recordEvent(r.Recorder, obj, typ, reason, action, note, args...)
}

var _ reconcile.Reconciler = &GenerationReconciler{}
