package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
)

// Adopter runs once when hosting starts: it lists what the node holds,
// leaves what belongs to a known Generation or Instance to the reconcilers
// (re-adoption), points each Instance's fence at its serving generation
// again, and kills and proves gone whatever belongs to nothing (orphans).
type Adopter struct {
	Client   client.Client
	Cache    cache.Cache
	Runtime  node.Runtime
	NodeName string
	Recorder events.EventRecorder
	Grace    time.Duration
	Log      logr.Logger
	// Boot is the node's boot record (nil: none is kept): a changed boot
	// ID proves every Generation of the old boot gone.
	Boot *boot.Record
	// Starter starts what served before a reboot (serveFirst; nil: the
	// reconcilers start everything).
	Starter *GenerationReconciler
	// proof is what a reboot proved, shared with the Generation
	// reconciler, which writes it.
	proof *rebootProof
	// instances and generations hold the reconcilers' work until
	// adoption is over, so a fence it restores from the cache never
	// undoes a newer promotion; instances also holds each Instance
	// serveFirst is still promoting.
	instances, generations *parking
}

// Start implements manager.Runnable.
func (a *Adopter) Start(ctx context.Context) error {
	defer func() {
		a.generations.open()
		a.instances.open()
	}()
	if !a.Cache.WaitForCacheSync(ctx) {
		return nil // stopping
	}
	verdict, ok := a.checkBoot(ctx)
	if !ok {
		return nil // stopping
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
	var refs []node.Ref
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		refs, err = a.Runtime.List(ctx)
		if err != nil {
			a.Log.Info("listing the node's units failed; retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		a.Log.Error(err, "re-adoption skipped: the node's units could not be listed")
		return nil // the reconcilers still observe every known Generation
	}
	for _, ref := range refs {
		if ref.Role == layout.RoleCommand {
			a.stopRun(ctx, ref)
			continue
		}
		known, err := a.known(ctx, ref)
		if err != nil {
			a.Log.Error(err, "cannot tell whether a unit is known; leaving it", "namespace", ref.Namespace, "name", ref.Name, "role", ref.Role, "generation", ref.Generation, "sidecar", ref.Sidecar)
			continue
		}
		if known {
			a.Log.Info("re-adopted", "namespace", ref.Namespace, "name", ref.Name, "role", ref.Role, "generation", ref.Generation, "sidecar", ref.Sidecar)
			continue
		}
		a.killOrphan(ctx, ref)
	}
	if verdict.Rebooted() {
		// No generation serves: each new one's promotion points the fence.
		a.serveFirst(ctx)
		return nil
	}
	a.refence(ctx)
	return nil
}

// known: the unit belongs to a Generation (or, for a role, an Instance)
// this node still has.
func (a *Adopter) known(ctx context.Context, ref node.Ref) (bool, error) {
	var obj client.Object = &v1.Instance{}
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	if ref.Generation > 0 {
		obj, key.Name = &v1.Generation{}, generationName(ref.Name, int64(ref.Generation))
	}
	err := a.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (a *Adopter) killOrphan(ctx context.Context, ref node.Ref) {
	log := a.Log.WithValues("namespace", ref.Namespace, "name", ref.Name, "role", ref.Role, "generation", ref.Generation, "sidecar", ref.Sidecar)
	began := time.Now()
	kill := a.Runtime.Retire(ctx, ref, a.Grace)
	metrics.ObserveKill(kill.Proven, string(kill.Reason), time.Since(began))
	what := fmt.Sprintf("%s/%s %s %d", ref.Namespace, ref.Name, ref.Role, ref.Generation)
	if ref.Generation == 0 {
		what = fmt.Sprintf("%s/%s %s", ref.Namespace, ref.Name, slotName(ref))
	}
	if kill.Proven {
		log.Info("orphan killed and proven gone")
		a.event(corev1.EventTypeNormal, "OrphanKilled", "orphan unit %s belonged to nothing; killed and proven gone", what)
		return
	}
	log.Info("orphan kill unproven", "reason", kill.Reason, "error", kill.Err().Error())
	a.event(corev1.EventTypeWarning, v1.ConditionKillUnproven, "orphan unit %s: kill unproven: %v", what, kill.Err())
}

// stopRun stops a run an earlier agent started: its caller's stream
// ended with that agent, so nothing can take its output or its exit. It
// is proven gone (and its files removed) like an orphan, and said on
// its Instance (on the Enrollment once the Instance is gone).
func (a *Adopter) stopRun(ctx context.Context, ref node.Ref) {
	log := a.Log.WithValues("namespace", ref.Namespace, "name", ref.Name, "run", ref.Command)
	began := time.Now()
	kill := a.Runtime.Retire(ctx, ref, a.Grace)
	metrics.ObserveKill(kill.Proven, string(kill.Reason), time.Since(began))
	typ, reason := corev1.EventTypeWarning, "RunAbandoned"
	note, args := "run %s outlived the agent that started it (its caller's stream ended with that agent); stopped and proven gone", []any{ref.Command}
	if kill.Proven {
		metrics.ObserveRun("abandoned", time.Since(began))
		if err := a.Runtime.Forget(ctx, ref); err != nil {
			log.Info("forget abandoned run", "err", err.Error())
		}
	} else {
		metrics.ObserveRun("unproven", time.Since(began))
		reason, note, args = v1.ConditionKillUnproven, "run %s outlived the agent that started it; its stop is unproven: %v", []any{ref.Command, kill.Err()}
	}
	log.Info("abandoned run stopped", "proven", kill.Proven)
	inst := &v1.Instance{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, inst); err != nil || a.Recorder == nil {
		a.event(typ, reason, ref.Namespace+"/"+ref.Name+": "+note, args...)
		return
	}
	a.Recorder.Eventf(inst, nil, typ, reason, "Adopt", note, args...)
}

// refence points each serving Instance's stable socket and write fence at
// its active generation again: an agent restart forgets the fence.
func (a *Adopter) refence(ctx context.Context) {
	var list v1.InstanceList
	if err := a.Client.List(ctx, &list); err != nil {
		a.Log.Error(err, "listing Instances to restore their fences")
		return
	}
	for _, inst := range list.Items {
		if inst.Spec.Suspend || inst.Status.ActiveGeneration == 0 || !inst.DeletionTimestamp.IsZero() {
			continue
		}
		ref := node.GenerationRef(inst.Namespace, inst.Name, inst.Status.ActiveGeneration)
		if _, err := a.Runtime.Promote(ctx, ref); err != nil {
			a.Log.Info("fence not restored", "namespace", inst.Namespace, "name", inst.Name, "error", err.Error())
		}
	}
}

// event is recorded on this node's Enrollment: an orphan has no object.
func (a *Adopter) event(typ, reason, note string, args ...any) {
	if a.Recorder == nil {
		return
	}
	enr := &v1.Enrollment{}
	if err := a.Client.Get(context.Background(), client.ObjectKey{Name: a.NodeName}, enr); err != nil {
		return
	}
	a.Recorder.Eventf(enr, nil, typ, reason, "Adopt", note, args...)
}
