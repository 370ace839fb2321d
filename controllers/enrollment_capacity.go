package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/capacity"
	"github.com/unitlet/unitlet/runtime/machine"
)

// CapacityReport is what the Enrollment says of the node's room for
// Instances: capacity (the machine), allocatable (minus the reserve and
// the pods bound to the node) and allocated (its Generations' tiers).
type CapacityReport struct {
	// Machine reads the node's whole (machine.Read).
	Machine func() (machine.Capacity, error)
	// Reserved is the administrator's reserve (the agent's --reserved).
	Reserved corev1.ResourceList
	// Cache reads this node's Generations and their Instances: the
	// agent's cache, which holds only this node's.
	Cache client.Reader
	// PodsEvery bounds how often the node's Node and pods are read.
	PodsEvery time.Duration
	// Debounce is how long a change of the node's Generations waits
	// before the round that counts it, so a burst makes one round.
	Debounce time.Duration

	// Of the one reconcile worker: the Node's allocatable (nil: no Node)
	// and the pods' requests as last read, and when.
	podsAt    time.Time
	nodeAlloc corev1.ResourceList
	pods      corev1.ResourceList
}

// capacityLists are the three lists of one round; nil where a read failed
// (the status keeps what it said).
type capacityLists struct {
	capacity, allocatable, allocated corev1.ResourceList
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// readCapacity reads the lists for this round. A failed read leaves its
// lists nil and is logged once per cause; it fails no round (the node's
// mode does not depend on it).
func (r *EnrollmentReconciler) readCapacity(ctx context.Context, s *enrollmentScope) (ctrl.Result, error) {
	c := r.Capacity
	if c == nil || s.enr == nil {
		return ctrl.Result{}, nil
	}
	var errs []error
	if m, err := c.Machine(); err != nil {
		errs = append(errs, fmt.Errorf("machine: %w", err))
	} else if err := c.readPods(ctx, r.Client, r.NodeName, r.Clock.Now()); err != nil {
		errs = append(errs, err)
		s.capacity.capacity = capacity.FromMachine(m)
	} else {
		s.capacity.capacity = capacity.FromMachine(m)
		s.capacity.allocatable = capacity.Allocatable(s.capacity.capacity, c.nodeAlloc, c.Reserved, c.pods)
	}
	if alloc, err := c.allocated(ctx); err != nil {
		errs = append(errs, err)
	} else {
		s.capacity.allocated = alloc
	}
	err := errors.Join(errs...)
	if r.capacityLog.changed(err) {
		r.Log.Error(err, "the node's capacity could not be read; the Enrollment keeps what it said")
	}
	return ctrl.Result{}, nil
}

// readPods reads the node's Node and the pods bound to it, at most every
// PodsEvery; a failure keeps the last read and tries again next round.
func (c *CapacityReport) readPods(ctx context.Context, api client.Reader, node string, now time.Time) error {
	if !c.podsAt.IsZero() && now.Sub(c.podsAt) < c.PodsEvery {
		return nil
	}
	var n corev1.Node
	var nodeAlloc corev1.ResourceList
	switch err := api.Get(ctx, types.NamespacedName{Name: node}, &n); {
	case apierrors.IsNotFound(err): // a node without a kubelet: the machine alone
	case err != nil:
		return fmt.Errorf("node %s: %w", node, err)
	default:
		nodeAlloc = n.Status.Allocatable
	}
	var pods corev1.PodList
	if err := api.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return fmt.Errorf("pods on node %s: %w", node, err)
	}
	c.podsAt, c.nodeAlloc, c.pods = now, nodeAlloc, capacity.PodsRequests(pods.Items)
	return nil
}

// allocated counts the tiers of this node's Generations (the cache
// holds no other node's), with the
// overlap.memory of each Instance two of them hold resources for.
func (c *CapacityReport) allocated(ctx context.Context) (corev1.ResourceList, error) {
	var gens v1.GenerationList
	if err := c.Cache.List(ctx, &gens); err != nil {
		return nil, fmt.Errorf("generations: %w", err)
	}
	overlap := map[types.NamespacedName]*resource.Quantity{}
	for _, key := range capacity.Overlapping(gens.Items) {
		var inst v1.Instance
		switch err := c.Cache.Get(ctx, key, &inst); {
		case apierrors.IsNotFound(err): // moved or gone: the tiers' sum
		case err != nil:
			return nil, fmt.Errorf("instance %s: %w", key, err)
		case inst.Spec.Overlap != nil:
			overlap[key] = inst.Spec.Overlap.Memory
		}
	}
	return capacity.Allocated(gens.Items, func(key types.NamespacedName) *resource.Quantity { return overlap[key] }), nil
}

// generationChanged enqueues the node's Enrollment after Debounce when
// one of its Generations appears, goes, or starts or stops holding
// resources; other status changes cannot change what is allocated.
func (r *EnrollmentReconciler) generationChanged() handler.TypedEventHandler[*v1.Generation, reconcile.Request] {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}}
	later := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.AddAfter(req, r.Capacity.Debounce) }
	return handler.TypedFuncs[*v1.Generation, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*v1.Generation], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(q)
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*v1.Generation], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.Generation], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if capacity.HoldsResources(e.ObjectOld) != capacity.HoldsResources(e.ObjectNew) {
				later(q)
			}
		},
	}
}

// setCapacity writes the lists read this round; a list not read keeps
// what the status said.
func setCapacity(st *v1.EnrollmentStatus, l capacityLists) {
	if l.capacity != nil {
		st.Capacity = l.capacity
	}
	if l.allocatable != nil {
		st.Allocatable = l.allocatable
	}
	if l.allocated != nil {
		st.Allocated = l.allocated
	}
}
