package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// ownWrites lets the Instance reconciler read its own writes. A reconcile
// woken by one event often reads the cache before the watch has brought
// back the agent's last write of that Instance (its finalizer, a status):
// computed from that older version, its status write conflicted and cost
// a GET and a second PATCH, several per Instance in a burst. The server's
// answer to each write is kept instead, with every version known to be
// older than it, and read in place of a cached version so known: the
// answer is the same object, only newer. A cached version not known to be
// older (another writer's, or the write come back) ends the entry: the
// cache is then as new as what was written, or newer. Resource versions
// are compared only for equality, as the API asks.
//
// Its own creates of Generations likewise: a reconcile woken before the
// watch brought back a Generation it created (by the agent's own status
// write) listed none, created the same one again and was refused
// (AlreadyExists): 8 of a batch of 30 on systemd, 0.1 per Instance on
// the direct backend (docs/reports/benchmarks.md). The server's answer
// to the create is added to a listing that lacks it, until a listing
// holds it, its Instance is forgotten, or createdKeep has passed (the
// watch brings a create back in far less; one deleted before the cache
// saw it is then no longer read back).
type ownWrites struct {
	mu      sync.Mutex
	m       map[types.NamespacedName]*ownWrite
	created map[types.NamespacedName]createdGeneration
}

// createdKeep bounds how long a created Generation is read back unseen.
const createdKeep = time.Minute

type createdGeneration struct {
	gen *v1.Generation
	at  time.Time
}

type ownWrite struct {
	obj   *v1.Instance
	older map[string]bool
}

// wrote records obj, as the server answered a write made on version
// before (which, and anything known older, is now older than obj).
func (w *ownWrites) wrote(before string, obj *v1.Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]*ownWrite{}
	}
	key := client.ObjectKeyFromObject(obj)
	e := w.m[key]
	if e == nil || e.obj.UID != obj.UID {
		e = &ownWrite{older: map[string]bool{}}
		w.m[key] = e
	} else {
		e.older[e.obj.ResourceVersion] = true
	}
	e.older[before] = true
	e.obj = obj.DeepCopy()
}

// newest puts into cached the agent's own last write of it when cached is
// a version known to be older than that write.
func (w *ownWrites) newest(cached *v1.Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(cached)
	e := w.m[key]
	switch {
	case e == nil:
	case e.obj.UID == cached.UID && e.older[cached.ResourceVersion]:
		e.obj.DeepCopyInto(cached)
	default:
		delete(w.m, key)
	}
}

func (w *ownWrites) forget(key types.NamespacedName) {
	if w == nil {
		return // a reconciler not set up with a manager keeps none
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
	for k, c := range w.created {
		if k.Namespace == key.Namespace && c.gen.Spec.Instance == key.Name {
			delete(w.created, k)
		}
	}
}

// wroteGeneration records g as the server answered its create.
func (w *ownWrites) wroteGeneration(g *v1.Generation, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.created == nil {
		w.created = map[types.NamespacedName]createdGeneration{}
	}
	w.created[client.ObjectKeyFromObject(g)] = createdGeneration{gen: g.DeepCopy(), at: now}
}

// withCreated adds to list (a listing made with opts) each Generation
// created and not in it yet; one it holds, or kept past createdKeep, is
// no longer remembered.
func (w *ownWrites) withCreated(list *v1.GenerationList, opts *client.ListOptions, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	listed := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		listed[list.Items[i].Name] = true
	}
	for k, c := range w.created {
		switch {
		case opts.Namespace != "" && k.Namespace != opts.Namespace,
			opts.LabelSelector != nil && !opts.LabelSelector.Matches(labels.Set(c.gen.Labels)),
			opts.FieldSelector != nil && !opts.FieldSelector.Matches(generationFields(c.gen)):
		case listed[k.Name], now.Sub(c.at) > createdKeep:
			delete(w.created, k)
		default:
			list.Items = append(list.Items, *c.gen.DeepCopy())
		}
	}
}

// ownWritesClient is the Instance reconciler's client: its reads of an
// Instance see the agent's own writes of it (ownWrites); everything else
// passes through.
type ownWritesClient struct {
	client.Client
	w   *ownWrites
	now func() time.Time
}

func (c *ownWritesClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if g, ok := obj.(*v1.Generation); ok && err == nil {
		c.w.wroteGeneration(g, c.now())
	}
	return err
}

func (c *ownWritesClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Client.List(ctx, list, opts...)
	if gens, ok := list.(*v1.GenerationList); ok && err == nil {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		c.w.withCreated(gens, o, c.now())
	}
	return err
}

func (c *ownWritesClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if inst, ok := obj.(*v1.Instance); ok && err == nil {
		c.w.newest(inst)
	}
	return err
}

func (c *ownWritesClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	before := obj.GetResourceVersion()
	err := c.Client.Update(ctx, obj, opts...)
	c.record(before, obj, err)
	return err
}

func (c *ownWritesClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	before := obj.GetResourceVersion()
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.record(before, obj, err)
	return err
}

func (c *ownWritesClient) Status() client.SubResourceWriter {
	return &ownWritesStatus{SubResourceWriter: c.Client.Status(), c: c}
}

// record keeps a successful write of an Instance made on version before.
func (c *ownWritesClient) record(before string, obj client.Object, err error) {
	if inst, ok := obj.(*v1.Instance); ok && err == nil && before != "" && inst.ResourceVersion != before {
		c.w.wrote(before, inst)
	}
}

type ownWritesStatus struct {
	client.SubResourceWriter
	c *ownWritesClient
}

func (s *ownWritesStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	before := obj.GetResourceVersion()
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.c.record(before, obj, err)
	return err
}

func (s *ownWritesStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	before := obj.GetResourceVersion()
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	s.c.record(before, obj, err)
	return err
}
