package controllers

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/instancekey"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/node"
)

// Hosting is what one node's reconcilers share.
type Hosting struct {
	Runtime  node.Runtime
	NodeName string
	// KeyNamespace holds the Instances' key Secrets; "" is
	// instancekey.DefaultNamespace.
	KeyNamespace string
	Recorder     events.EventRecorder
	// Gate is consulted before new work; nil always accepts.
	Gate hostgate.Gate
	// Grace is how long a retiring generation gets between SIGTERM and
	// the kill.
	Grace time.Duration
	// ProbeInterval is how often a starting generation is probed; 0 is
	// the GenerationReconciler's default.
	ProbeInterval time.Duration
	// ObserveEvery is how often a running generation is looked at again
	// with no event (a backstop); 0 is 5 minutes.
	ObserveEvery time.Duration
	// RestartBackoff spaces the restarts of what keeps dying; zero values are
	// the kubelet's CrashLoopBackOff figures.
	RestartBackoff Backoff
	// Boot is the node's boot record, checked once at adoption (nil:
	// none kept, so no reboot is ever told).
	Boot *boot.Record
}

// NodeCache is what a node's cache holds of each kind the reconcilers
// watch: only that node's Instances, Generations and HostClaims, so the
// API server's watch, not the agent, bears the cluster's size. A claim
// of another node is read from the API server when an Instance of this
// node asks for its host (see createClaim); a moved holder's claim
// follows it here (cluster/moves).
func NodeCache(nodeName string) map[client.Object]cache.ByObject {
	onNode := fields.OneTermEqualSelector(v1.FieldNodeName, nodeName)
	return map[client.Object]cache.ByObject{
		&v1.Instance{}:   {Field: onNode},
		&v1.Generation{}: {Field: onNode},
		&v1.HostClaim{}:  {Field: onNode},
	}
}

// Backoff is a delay that starts at Initial and doubles up to Max.
type Backoff struct{ Initial, Max time.Duration }

// SetupHosting registers the Instance and Generation reconcilers of one
// node on mgr, wired so that the runtime's events about a seed or a
// sidecar (which belong to no Generation) wake the Instance they serve.
// The agent, and every suite that runs the reconcilers, set up through
// here, so none runs them wired differently.
func SetupHosting(mgr ctrl.Manager, h Hosting) error {
	keyNS := cmp.Or(h.KeyNamespace, instancekey.DefaultNamespace)
	roleEvents := make(chan event.TypedGenericEvent[*v1.Instance], 64)
	// Adoption first: it restores each Instance's fence from the cache,
	// which must not undo a promotion a reconcile made meanwhile.
	instances, generations := newParking(nil), newParking(nil) // each controller's setup gives its wake
	gens := &GenerationReconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Runtime: h.Runtime, NodeName: h.NodeName, KeyNamespace: keyNS,
		Recorder: h.Recorder, Gate: h.Gate, Grace: h.Grace, ProbeInterval: h.ProbeInterval, ObserveEvery: h.ObserveEvery, RoleEvents: roleEvents, parked: generations,
	}
	adopter := &Adopter{
		Client: mgr.GetClient(), Cache: mgr.GetCache(), Runtime: h.Runtime, NodeName: h.NodeName,
		Recorder: h.Recorder, Grace: h.Grace, Log: mgr.GetLogger().WithName("adopt"), Boot: h.Boot, Starter: gens,
		instances: instances, generations: generations,
	}
	if h.Boot != nil {
		// A reboot's proof is written by the Generation reconciler, after
		// the node serves again.
		adopter.proof = &rebootProof{rec: h.Boot, log: adopter.Log, event: adopter.event}
		gens.reboot = adopter.proof
	}
	if err := mgr.Add(adopter); err != nil {
		return fmt.Errorf("adopter: %w", err)
	}
	if err := (&InstanceReconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Runtime: h.Runtime, NodeName: h.NodeName, KeyNamespace: keyNS,
		Recorder: h.Recorder, Gate: h.Gate, RoleEvents: roleEvents, RestartBackoff: h.RestartBackoff, parked: instances,
		reboot: adopter.proof,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("instance controller: %w", err)
	}
	if err := gens.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("generation controller: %w", err)
	}
	return nil
}
