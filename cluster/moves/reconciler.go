package moves

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// DefaultSettle is how long after a move's promotion the old node's
// generations are retired: the time a front end that watches status is
// given to route to the new node before the old one drains.
const DefaultSettle = 2 * time.Second

// Reconciler retires or deletes an Instance's generations on the nodes
// it moved from.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Settle   time.Duration

	// serving is, per Instance UID, the active generation seen serving on
	// the target node and when it was first seen.
	serving sync.Map
}

type servingSeen struct {
	number int64
	at     time.Time
}

// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=instances,verbs=get;list;watch
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=generations,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies Decide's plan to one Instance.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &v1.Instance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list v1.GenerationList
	if err := r.Client.List(ctx, &list, client.InNamespace(inst.Namespace), client.MatchingLabels{v1.LabelInstance: inst.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list generations: %w", err)
	}
	gens := make([]*v1.Generation, 0, len(list.Items))
	for i := range list.Items {
		if controlledBy(&list.Items[i], inst) {
			gens = append(gens, &list.Items[i])
		}
	}
	p := Decide(Facts{Instance: inst, Gens: gens, ServingSince: r.servingSince(inst, gens),
		Now: r.Clock.Now(), Settle: r.Settle})
	for _, g := range p.Retire {
		if err := r.retire(ctx, inst, g); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, g := range p.Delete {
		if err := r.Client.Delete(ctx, g, client.Preconditions{UID: &g.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete generation %d on node %s: %w", g.Spec.Number, g.Spec.NodeName, err)
		}
	}
	return ctrl.Result{RequeueAfter: p.Wait}, nil
}

// retire marks g retired; its node's agent drains and stops it.
func (r *Reconciler) retire(ctx context.Context, inst *v1.Instance, g *v1.Generation) error {
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.Retired = true
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	because := v1.RetiredMoved
	if inst.Spec.Suspend {
		because = v1.RetiredSuspended
	}
	g.Annotations[v1.AnnotationRetiredBecause] = because
	if err := r.Client.Patch(ctx, g, patch); err != nil {
		return fmt.Errorf("retire generation %d on node %s: %w", g.Spec.Number, g.Spec.NodeName, err)
	}
	if because == v1.RetiredMoved {
		r.Recorder.Eventf(inst, g, corev1.EventTypeNormal, "Moved", "Retire",
			"generation %d serves on node %s; generation %d on node %s is retiring",
			inst.Status.ActiveGeneration, inst.Status.NodeName, g.Spec.Number, g.Spec.NodeName)
	}
	return nil
}

// servingSince is when inst's serving generation was first seen serving
// on its target node (zero: it does not).
func (r *Reconciler) servingSince(inst *v1.Instance, gens []*v1.Generation) time.Time {
	key := types.NamespacedName{Namespace: inst.Namespace, Name: inst.Name}
	if !ServesOn(inst, gens, inst.Spec.NodeName) {
		r.serving.Delete(key)
		return time.Time{}
	}
	seen := servingSeen{number: inst.Status.ActiveGeneration, at: r.Clock.Now()}
	if v, ok := r.serving.LoadOrStore(key, seen); ok && v.(servingSeen).number == seen.number {
		return v.(servingSeen).at
	}
	r.serving.Store(key, seen)
	return seen.at
}

func (r *Reconciler) forget(key types.NamespacedName) { r.serving.Delete(key) }

func controlledBy(g *v1.Generation, inst *v1.Instance) bool {
	for _, o := range g.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.UID == inst.UID
		}
	}
	return true // made before owner references: the label names it
}

// SetupWithManager watches Instances and Generations (a Generation's
// change is its Instance's).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Settle == 0 {
		r.Settle = DefaultSettle
	}
	ofInstance := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		g := o.(*v1.Generation)
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Spec.Instance}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("moves").
		For(&v1.Instance{}).
		Watches(&v1.Generation{}, ofInstance).
		Complete(r)
}
