package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
)

// rebootProof is what a reboot proved and the API does not say yet: the
// Generations of the old boot not yet written gone. Adoption fills it
// from the node's record (boot.Pending); the Generation reconciler writes
// each one's status from it, on its workers, after the node serves
// again, and never starts or observes one of them meanwhile. Once every
// one is written the record is removed and the node's Enrollment says
// so. Its methods do nothing on a nil proof (no boot record kept).
type rebootProof struct {
	rec *boot.Record
	log logr.Logger
	// event records the reboot's one Event, on the Enrollment.
	event func(typ, reason, note string, args ...any)

	mu      sync.Mutex
	verdict boot.Verdict
	left    map[types.NamespacedName]types.UID
	written int
}

// proofKey is how a Generation is named in boot.Pending.
func proofKey(namespace, name, uid string) string { return namespace + "/" + name + "/" + uid }

// load takes p's generations, less those the cache no longer holds (or
// holds re-created): those need no writing.
func (p *rebootProof) load(ctx context.Context, c client.Reader, pending boot.Pending) {
	if p == nil {
		return
	}
	left := map[types.NamespacedName]types.UID{}
	for _, k := range pending.Generations {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) != 3 {
			continue
		}
		key := types.NamespacedName{Namespace: parts[0], Name: parts[1]}
		var gen v1.Generation
		if err := c.Get(ctx, key, &gen); err == nil && string(gen.UID) == parts[2] {
			left[key] = gen.UID
		}
	}
	p.mu.Lock()
	p.verdict, p.left, p.written = pending.Verdict(), left, 0
	p.mu.Unlock()
	p.log.Info("the old boot's generations to write gone", "count", len(left), "recorded", len(pending.Generations))
	p.doneIfEmpty()
}

// pending is the reboot that took gen, when its status is yet to say so.
func (p *rebootProof) pending(gen *v1.Generation) (boot.Verdict, bool) {
	if p == nil {
		return boot.Verdict{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, ok := p.left[types.NamespacedName{Namespace: gen.Namespace, Name: gen.Name}]
	return p.verdict, ok && uid == gen.UID
}

// done: key's status, as the cache reads it, says it went with the old
// boot (or was proven gone before), or key is gone.
func (p *rebootProof) done(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if _, ok := p.left[key]; !ok {
		p.mu.Unlock()
		return
	}
	delete(p.left, key)
	p.written++
	p.mu.Unlock()
	p.doneIfEmpty()
}

// doneIfEmpty removes the node's record once nothing is left to write.
func (p *rebootProof) doneIfEmpty() {
	p.mu.Lock()
	if p.left == nil || len(p.left) > 0 {
		p.mu.Unlock()
		return
	}
	if err := p.rec.ClearPending(); err != nil {
		p.mu.Unlock()
		p.log.Error(err, "the reboot's proof is written; its record on the node was not removed")
		return
	}
	p.left = nil
	v, written := p.verdict, p.written
	p.mu.Unlock()
	p.log.Info("the old boot's generations are written gone", "count", written)
	if p.event != nil {
		p.event(corev1.EventTypeNormal, v1.ReasonNodeRebooted,
			"the node rebooted (boot ID %s, now %s): %d generations of the old boot proven gone", v.Previous, v.Current, written)
	}
}

// writeGoneWithBoot writes gen's status as gone with the old boot v.
func (r *GenerationReconciler) writeGoneWithBoot(ctx context.Context, gen *v1.Generation, v boot.Verdict) error {
	before := gen.DeepCopy()
	generationStatus(gen, genFacts{rebooted: &v})
	gen.Status.ObservedGeneration = gen.Generation
	wctx, cancel := writeContext(ctx)
	defer cancel()
	if err := patchStatus(wctx, r.Client, gen, before, true); err != nil {
		return fmt.Errorf("write generation %d gone with the old boot: %w", gen.Spec.Number, err)
	}
	r.phases.set(types.NamespacedName{Namespace: gen.Namespace, Name: gen.Name}, gen.Status.Phase)
	return nil
}
