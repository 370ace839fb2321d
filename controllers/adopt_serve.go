package controllers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// After a reboot the node serves first and reports afterwards: every
// Instance that served when the node went down is started again from
// what the agent's cache holds, and its stable socket flipped to the new
// generation as soon as that answers, without waiting for any status
// write. Only the new Generation is created first, each on its own and without
// waiting for the watch to bring it back: it is the record and the lease
// of the unit about to run, so a start is never without one. Everything
// else (the old boot's generations written gone, the new one's Started
// and Ready, the Instance's promotion and its retirement of the old one)
// is the reconcilers' once adoption is over (every start handed off),
// from what this start handed them (GenerationReconciler.handedOff), on
// their workers and within the API's budget; the Instance reconciler
// leaves an Instance alone until its promotion here is done or given up
// (parking). Whatever does not fit the plain case is left to them
// from the start.

// serveFirstBudget bounds how long a generation adoption started is
// probed before its promotion is left to the reconcilers (which probe and
// promote it as any other), when its readiness timeout is longer.
const serveFirstBudget = 30 * time.Second

// serveWorkers is how many Instances are created and started at once:
// as many as a controller's workers. At N=200 (make bench's reboot) 4,
// 16 and 32 served all in the same time: the starts' CPU bounds it on
// two cores, not how many run at once.
const serveWorkers = workers

// servable is an Instance to serve again and the number its new
// generation takes.
type servable struct {
	inst *v1.Instance
	next int64
}

// servesAgain: inst served (its active generation ran) when the node
// went down, and nothing asks for anything but serving it again as it
// is: on this node, not being deleted, suspended, moved or woken on
// demand, its key minted and its host claimed, and no generation of the
// new boot made for it yet. gens are its generations on this node;
// oldBoot says which the reboot took. Any other Instance is left to the
// reconcilers.
func servesAgain(inst *v1.Instance, gens []*v1.Generation, claim *v1.HostClaim, nodeName string, oldBoot func(*v1.Generation) bool) (int64, bool) {
	switch {
	case inst.Spec.NodeName != nodeName, !inst.DeletionTimestamp.IsZero(), !controllerutil.ContainsFinalizer(inst, v1.Finalizer),
		inst.Spec.Suspend, inst.Spec.SocketActivation != nil,
		inst.Status.NodeName != "" && inst.Status.NodeName != nodeName,
		inst.Status.KeyFingerprint == "", inst.Status.ActiveGeneration == 0,
		claim == nil || claim.Spec.UID != inst.UID:
		return 0, false
	}
	var newest int64
	activeTaken := false
	for _, g := range gens {
		if !oldBoot(g) && !terminated(g) {
			return 0, false // of the new boot: an earlier agent of this boot began
		}
		newest = max(newest, g.Spec.Number)
		if g.Spec.Number == inst.Status.ActiveGeneration {
			activeTaken = oldBoot(g)
		}
	}
	return newest + 1, activeTaken
}

// toServe is every Instance of this node that servesAgain, from the cache.
func (a *Adopter) toServe(ctx context.Context) []servable {
	var insts v1.InstanceList
	var gens v1.GenerationList
	if err := a.Client.List(ctx, &insts); err != nil {
		a.Log.Error(err, "listing Instances to serve again; the reconcilers start them")
		return nil
	}
	if err := a.Client.List(ctx, &gens); err != nil {
		a.Log.Error(err, "listing Generations to serve again; the reconcilers start them")
		return nil
	}
	byInst := map[types.NamespacedName][]*v1.Generation{}
	for i := range gens.Items {
		g := &gens.Items[i]
		if g.Spec.NodeName == a.NodeName {
			k := types.NamespacedName{Namespace: g.Namespace, Name: g.Spec.Instance}
			byInst[k] = append(byInst[k], g)
		}
	}
	oldBoot := func(g *v1.Generation) bool { _, ok := a.proof.pending(g); return ok }
	var out []servable
	for i := range insts.Items {
		inst := &insts.Items[i]
		claim, err := getClaim(ctx, a.Client, inst.Spec.Host)
		if err != nil {
			continue
		}
		gs := byInst[types.NamespacedName{Namespace: inst.Namespace, Name: inst.Name}]
		if next, ok := servesAgain(inst, gs, claim, a.NodeName, oldBoot); ok {
			out = append(out, servable{inst: inst, next: next})
		}
	}
	return out
}

// serveFirst serves again every Instance toServe names: workers create
// and start their generations; it returns once every start was handed
// off (adoption is then over), and each generation is promoted once it
// answers, meanwhile.
func (a *Adopter) serveFirst(ctx context.Context) {
	if a.Starter == nil || !a.Starter.Gate.Accepting() {
		return
	}
	began := time.Now()
	todo := a.toServe(ctx)
	var started, serving atomic.Int64
	var t timings
	var workersDone, probes sync.WaitGroup
	work := make(chan servable)
	for range serveWorkers {
		workersDone.Add(1)
		go func() {
			defer workersDone.Done()
			for s := range work {
				key := types.NamespacedName{Namespace: s.inst.Namespace, Name: s.inst.Name}
				a.instances.hold(key)
				gen := a.startAgain(ctx, s, &t)
				if gen == nil {
					a.instances.release(key)
					continue
				}
				started.Add(1)
				probes.Add(1)
				go func() {
					defer probes.Done()
					defer a.instances.release(key)
					if a.Starter.promoteWhenReady(ctx, gen) {
						serving.Add(1)
					}
				}()
			}
		}()
	}
	for _, s := range todo {
		work <- s
	}
	close(work)
	workersDone.Wait()
	a.Log.Info("started again after the reboot, before reporting", "instances", len(todo), "started", started.Load(),
		"took", time.Since(began).String(), "createMean", t.create.mean().String(), "startMean", t.start.mean().String())
	go func() {
		probes.Wait()
		a.Log.Info("served again after the reboot, before reporting", "serving", serving.Load(), "of", started.Load(),
			"took", time.Since(began).String())
	}()
}

// startAgain creates s's new generation and starts it; nil when it was
// not started (the reconcilers take it from there, with what is known).
func (a *Adopter) startAgain(ctx context.Context, s servable, t *timings) *v1.Generation {
	log := a.Log.WithValues("namespace", s.inst.Namespace, "name", s.inst.Name)
	// The Instance reconciler's own making of a generation, so both make
	// the same one.
	began := time.Now()
	g, err := (&InstanceReconciler{Client: a.Client}).createGeneration(ctx, s.inst, s.next)
	t.create.add(time.Since(began))
	if err != nil {
		log.Info("not served again before reporting: its generation was not created", "error", err.Error())
		return nil
	}
	if g.UID == "" {
		return nil // it existed already: not this start's
	}
	gs := &generationScope{gen: g}
	began = time.Now()
	_, err = a.Starter.start(ctrl.LoggerInto(ctx, log), gs)
	t.start.add(time.Since(began))
	if err != nil || gs.facts.start == nil {
		log.Info("not served again before reporting: not started", "error", errString(err))
		return nil
	}
	if gs.facts.start.Kind != outcome.Running {
		log.Info("not served again before reporting", "outcome", gs.facts.start.Kind.String())
		return nil
	}
	return g
}

// promoteWhenReady probes gen as its reconcile would, and flips its
// Instance's stable socket to it once it answers; false when it did not
// answer within its readiness timeout (serveFirstBudget at most).
func (r *GenerationReconciler) promoteWhenReady(ctx context.Context, gen *v1.Generation) bool {
	ctx, cancel := context.WithTimeout(ctx, min(readinessTimeout(&gen.Spec.Template), serveFirstBudget))
	defer cancel()
	ref, readiness := refOf(gen), readinessOf(&gen.Spec.Template)
	wait := minProbeWait
	for r.Runtime.Probe(ctx, ref, readiness) != nil {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, r.ProbeInterval)
	}
	if _, err := r.Runtime.Promote(ctx, ref); err != nil {
		ctrl.LoggerFrom(ctx).Info("not promoted before reporting", "generation", gen.Spec.Number, "error", err.Error())
		return false
	}
	return true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// timings are the mean durations of serveFirst's steps, for its log.
type timings struct{ create, start meanDuration }

type meanDuration struct{ sum, n atomic.Int64 }

func (m *meanDuration) add(d time.Duration) { m.sum.Add(int64(d)); m.n.Add(1) }

func (m *meanDuration) mean() time.Duration {
	if n := m.n.Load(); n > 0 {
		return time.Duration(m.sum.Load() / n)
	}
	return 0
}
