package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// parking sets aside the reconciles that come while adoption runs (and,
// for an Instance, while adoption still serves it first), and wakes each
// once that is over. A reconcile set aside costs a map entry: requeued
// every 200 ms instead, as before, the requeues of 1,000 Instances and
// their generations took a quarter of the agent's CPU while it served
// again after a reboot. Nil parks nothing.
type parking struct {
	mu sync.Mutex
	// over: adoption is over; a key still held waits for its release.
	over bool
	// held are the Instances adoption serves first and has neither
	// promoted nor given up yet: left alone, so that this promotion
	// never undoes one of the Instance reconciler's own (a template
	// changed during the reboot).
	held map[types.NamespacedName]bool
	// asked are the keys whose reconcile came and was set aside.
	asked map[types.NamespacedName]bool
	// wake enqueues the keys' reconciles again; it must not block.
	wake func([]types.NamespacedName)
}

func newParking(wake func([]types.NamespacedName)) *parking {
	return &parking{held: map[types.NamespacedName]bool{}, asked: map[types.NamespacedName]bool{}, wake: wake}
}

// park sets k's reconcile aside while adoption runs or holds k; false:
// reconcile it now.
func (p *parking) park(k types.NamespacedName) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.over && !p.held[k] {
		return false
	}
	p.asked[k] = true
	return true
}

// hold keeps k's reconciles aside until release(k), even after open.
func (p *parking) hold(k types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[k] = true
}

// release lets k go, and wakes it if a reconcile of it was set aside
// and adoption is over (else open wakes it).
func (p *parking) release(k types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.held, k)
	wake := p.over && p.asked[k]
	if wake {
		delete(p.asked, k)
	}
	p.mu.Unlock()
	if wake {
		p.wake([]types.NamespacedName{k})
	}
}

// open ends adoption: every key set aside and not held is woken.
func (p *parking) open() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.over = true
	var keys []types.NamespacedName
	for k := range p.asked {
		if !p.held[k] {
			keys = append(keys, k)
			delete(p.asked, k)
		}
	}
	p.mu.Unlock()
	if len(keys) > 0 {
		p.wake(keys)
	}
}

// wakeOn is a parking's wake that sends each key on ch as an object of
// its name, from a goroutine of its own: the controller's source drains
// ch while the manager runs.
func wakeOn[T client.Object](ch chan<- event.TypedGenericEvent[T], obj func(types.NamespacedName) T) func([]types.NamespacedName) {
	return func(keys []types.NamespacedName) {
		go func() {
			for _, k := range keys {
				ch <- event.TypedGenericEvent[T]{Object: obj(k)}
			}
		}()
	}
}
