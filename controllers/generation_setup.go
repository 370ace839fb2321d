package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/node"
)

// phaseCounts keeps the last phase of each Generation and the counts by
// phase, and publishes the counts whenever one changes.
type phaseCounts struct {
	mu     sync.Mutex
	last   map[types.NamespacedName]v1.GenerationPhase
	counts map[string]int
}

func (p *phaseCounts) set(key types.NamespacedName, phase v1.GenerationPhase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last, p.counts = map[types.NamespacedName]v1.GenerationPhase{}, map[string]int{}
	}
	old, ok := p.last[key]
	if ok && old == phase {
		return
	}
	if ok {
		p.counts[string(old)]--
	}
	p.last[key] = phase
	p.counts[string(phase)]++
	metrics.SetGenerationPhases(p.counts)
}

func (p *phaseCounts) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.last[key]; ok {
		delete(p.last, key)
		p.counts[string(old)]--
		metrics.SetGenerationPhases(p.counts)
	}
}

// SetupWithManager watches Generations and the runtime's unit events.
func (r *GenerationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ProbeInterval == 0 {
		r.ProbeInterval = 250 * time.Millisecond
	}
	if r.ObserveEvery == 0 {
		r.ObserveEvery = 5 * time.Minute
	}
	if r.Gate == nil {
		r.Gate = hostgate.Always{}
	}
	events := make(chan event.TypedGenericEvent[*v1.Generation], 64)
	if r.parked != nil {
		r.parked.wake = wakeOn(events, func(k types.NamespacedName) *v1.Generation {
			return &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		})
	}
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
