package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// tracker watches the bench's objects and records when each first met a
// condition (or was deleted: gone).
type tracker struct {
	mu   sync.Mutex
	met  map[string]time.Time
	want map[string]bool
	all  chan struct{}
}

// kind is what a tracker lists and watches: the bench's Instances, or
// their Generations.
type kind[T client.Object] struct {
	newList func() client.ObjectList
	items   func(client.ObjectList) []T
}

var (
	instances = kind[*v1.Instance]{
		newList: func() client.ObjectList { return &v1.InstanceList{} },
		items: func(l client.ObjectList) []*v1.Instance {
			return ptrs(l.(*v1.InstanceList).Items)
		},
	}
	generations = kind[*v1.Generation]{
		newList: func() client.ObjectList { return &v1.GenerationList{} },
		items: func(l client.ObjectList) []*v1.Generation {
			return ptrs(l.(*v1.GenerationList).Items)
		},
	}
)

func ptrs[E any](items []E) []*E {
	out := make([]*E, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// track starts watching the bench's Instances before the phase acts, so
// nothing is missed; cond nil waits for deletion.
func (h *harness) track(ctx context.Context, names []string, cond func(*v1.Instance) bool) (*tracker, func(), error) {
	return trackKind(ctx, h, instances, names, cond)
}

// trackKind watches objects of k named names until each met cond. A
// watch the API server ends (it does, under load) is started again after
// a list, which also counts what happened meanwhile.
func trackKind[T client.Object](ctx context.Context, h *harness, k kind[T], names []string, cond func(T) bool) (*tracker, func(), error) {
	tr := &tracker{met: map[string]time.Time{}, want: map[string]bool{}, all: make(chan struct{})}
	for _, n := range names {
		tr.want[n] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	rv, err := relist(ctx, h, k, tr, cond)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	go func() {
		for ctx.Err() == nil {
			follow(ctx, h, k, tr, cond, rv)
			sleep(ctx, 100*time.Millisecond)
			if next, err := relist(ctx, h, k, tr, cond); err == nil {
				rv = next
			}
		}
	}()
	return tr, cancel, nil
}

// relist counts what a list shows and returns its resource version.
func relist[T client.Object](ctx context.Context, h *harness, k kind[T], tr *tracker, cond func(T) bool) (string, error) {
	list := k.newList()
	if err := h.c.List(ctx, list, client.InNamespace(benchNS)); err != nil {
		return "", err
	}
	now, present := time.Now(), map[string]bool{}
	for _, o := range k.items(list) {
		present[o.GetName()] = true
		if cond != nil && cond(o) {
			tr.hit(o.GetName(), now)
		}
	}
	if cond == nil {
		for n := range tr.want {
			if !present[n] {
				tr.hit(n, now)
			}
		}
	}
	return list.GetResourceVersion(), nil
}

// follow counts watch events from rv until the watch ends.
func follow[T client.Object](ctx context.Context, h *harness, k kind[T], tr *tracker, cond func(T) bool, rv string) {
	w, err := h.c.Watch(ctx, k.newList(), client.InNamespace(benchNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		o, ok := ev.Object.(T)
		if !ok {
			return // an error event: list and watch again
		}
		if !tr.want[o.GetName()] {
			continue
		}
		if (cond == nil && ev.Type == watch.Deleted) || (cond != nil && ev.Type != watch.Deleted && cond(o)) {
			tr.hit(o.GetName(), time.Now())
		}
	}
}

func (t *tracker) hit(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.met[name]; seen {
		return
	}
	t.met[name] = at
	if len(t.met) == len(t.want) {
		close(t.all)
	}
}

// wait returns when every name met the condition, or at the limit; it
// says how far it got every 30 s.
func (t *tracker) wait(ctx context.Context, limit time.Duration) error {
	t0 := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	end := time.After(limit)
	for {
		select {
		case <-t.all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			t.mu.Lock()
			fmt.Printf("bench:   %d of %d after %s\n", len(t.met), len(t.want), time.Since(t0).Round(time.Second))
			t.mu.Unlock()
		case <-end:
			t.mu.Lock()
			defer t.mu.Unlock()
			var missing []string
			for n := range t.want {
				if _, ok := t.met[n]; !ok && len(missing) < 5 {
					missing = append(missing, n)
				}
			}
			return fmt.Errorf("%d of %d reached within %s; not %v", len(t.met), len(t.want), limit, missing)
		}
	}
}

func (t *tracker) times() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.met))
	for k, v := range t.met {
		out[k] = v
	}
	return out
}
