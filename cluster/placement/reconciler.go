package placement

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// retryUnschedulable is how often an Instance no node takes is decided
// again even if no Enrollment, Lease or Instance change says to.
const retryUnschedulable = time.Minute

// Reconciler binds unplaced Instances to nodes and moves those whose
// moves are Allowed off nodes they must leave. One decision at a time
// (one worker), as the kube-scheduler's: each counts the one before.
type Reconciler struct {
	Client client.Client
	// APIReader reads uncached, for a status write's retry.
	APIReader      client.Reader
	Recorder       events.EventRecorder
	LeaseNamespace string
	// SpreadLabel groups an owner's Instances for spreading.
	SpreadLabel string
	Clock       clock.PassiveClock

	ledger Ledger
	mu     sync.Mutex
	// waiting: Instances no node took, with the last message said (an
	// Event only when it changes); retried on every node change.
	waiting map[types.NamespacedName]string
	// pending: a Scheduled condition whose write failed after its
	// binding landed, written on the next reconcile (not taken for a pin).
	pending map[types.UID]metav1.Condition
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=enrollments,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile binds, pins or moves one Instance.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		r.setWaiting(req.NamespacedName, "", false)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if inst.DeletionTimestamp != nil {
		r.setWaiting(req.NamespacedName, "", false)
		return ctrl.Result{}, nil
	}
	if c, ok := r.takePending(inst.UID); ok {
		return ctrl.Result{}, r.setScheduled(ctx, inst, c, false)
	}
	if inst.Spec.NodeName == "" {
		return r.place(ctx, inst, "", "")
	}
	if meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionScheduled) == nil {
		if err := r.setScheduled(ctx, inst, metav1.Condition{Type: v1.ConditionScheduled, Status: metav1.ConditionTrue,
			Reason: v1.ReasonPinned, Message: fmt.Sprintf("pinned to node %s by its spec", inst.Spec.NodeName)}, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	h, err := r.health(ctx, inst.Spec.NodeName)
	if err != nil {
		return ctrl.Result{}, err
	}
	why, recheck := MoveWhy(inst, h, r.Clock.Now())
	if why == "" {
		r.setWaiting(req.NamespacedName, "", false)
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	return r.place(ctx, inst, inst.Spec.NodeName, why)
}

// place decides a node for inst (excluding from, a move's source, whose
// reason is why) and writes the binding, or says none fits.
func (r *Reconciler) place(ctx context.Context, inst *v1.Instance, from, why string) (ctrl.Result, error) {
	nodes, err := r.nodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(Request{
		Namespace: inst.Namespace, Spread: inst.Labels[r.SpreadLabel], Demand: Demand(inst),
		NodeSelector: nodeSelector(inst), Exclude: from,
	}, nodes)
	if d.Node == "" {
		return ctrl.Result{RequeueAfter: retryUnschedulable}, r.unschedulable(ctx, inst, from, why, d.Message)
	}
	r.setWaiting(client.ObjectKeyFromObject(inst), "", false)
	return ctrl.Result{}, r.bind(ctx, inst, d.Node, from, why)
}

func nodeSelector(inst *v1.Instance) map[string]string {
	if inst.Spec.Placement == nil {
		return nil
	}
	return inst.Spec.Placement.NodeSelector
}

// unschedulable records that no node takes inst: Scheduled=False on an
// unplaced one, and an Event when the message is new.
func (r *Reconciler) unschedulable(ctx context.Context, inst *v1.Instance, from, why, msg string) error {
	if from != "" {
		msg = fmt.Sprintf("cannot move off node %s (%s): %s", from, why, msg)
	}
	if r.setWaiting(client.ObjectKeyFromObject(inst), msg, true) {
		r.Recorder.Eventf(inst, nil, corev1.EventTypeWarning, "FailedScheduling", "Schedule", "%s", msg)
	}
	log.FromContext(ctx).V(1).Info("unschedulable", "message", msg)
	if from != "" {
		return nil // still bound where it is; its condition stays
	}
	return r.setScheduled(ctx, inst, metav1.Condition{Type: v1.ConditionScheduled, Status: metav1.ConditionFalse,
		Reason: v1.ReasonUnschedulable, Message: msg}, false)
}

// setWaiting records (or, with on false, forgets) inst as waiting for a
// node with msg; true when msg is new for it.
func (r *Reconciler) setWaiting(key types.NamespacedName, msg string, on bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !on {
		delete(r.waiting, key)
		return false
	}
	if r.waiting == nil {
		r.waiting = map[types.NamespacedName]string{}
	}
	old, ok := r.waiting[key]
	r.waiting[key] = msg
	return !ok || old != msg
}

func (r *Reconciler) waitingKeys() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(r.waiting))
	for k := range r.waiting {
		out = append(out, k)
	}
	return out
}

func (r *Reconciler) takePending(uid types.UID) (metav1.Condition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.pending[uid]
	return c, ok
}

func (r *Reconciler) setPending(uid types.UID, c *metav1.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[types.UID]metav1.Condition{}
	}
	if c == nil {
		delete(r.pending, uid)
		return
	}
	r.pending[uid] = *c
}

// leaseOf returns node's Lease from the cache, nil when it has none.
func (r *Reconciler) leaseOf(leases []coordinationv1.Lease, node string) *coordinationv1.Lease {
	for i := range leases {
		if leases[i].Name == node {
			return &leases[i]
		}
	}
	return nil
}

// The leader's Lease (controller-runtime's leader election) and its
// Events, in the namespace the Deployment runs in.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=unitlet-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=unitlet-system
