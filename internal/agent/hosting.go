package agent

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/metrics"
)

// stopGrace is how long a retiring generation has between SIGTERM and
// the kill.
const stopGrace = 10 * time.Second

// setupHosting registers the reconcilers that run this node's Instances.
// It is called once, when the node first reaches the hosting mode; until
// then the agent hosts nothing.
func setupHosting(mgr ctrl.Manager, opts Options) error {
	log := mgr.GetLogger().WithName("runtime")
	rt, backend, err := newRuntime(opts, log)
	if err != nil {
		return fmt.Errorf("node runtime: %w", err)
	}
	if opts.atExit != nil {
		opts.atExit.add(rt.Close)
	}
	log.Info("node runtime ready", "unitBackend", backend)
	metrics.SetAgentInfo(opts.NodeName, Version, backend)
	recorder := mgr.GetEventRecorder("unitlet-agent")
	roleEvents := make(chan event.TypedGenericEvent[*hostingv1alpha1.Instance], 64)
	if err := (&controllers.InstanceReconciler{
		Client: mgr.GetClient(), Runtime: rt, NodeName: opts.NodeName, Recorder: recorder, Gate: opts.Gate,
		RoleEvents: roleEvents,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("instance controller: %w", err)
	}
	if err := (&controllers.GenerationReconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Runtime: rt, NodeName: opts.NodeName,
		Recorder: recorder, Gate: opts.Gate, Grace: stopGrace, RoleEvents: roleEvents,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("generation controller: %w", err)
	}
	return mgr.Add(&controllers.Adopter{
		Client: mgr.GetClient(), Cache: mgr.GetCache(), Runtime: rt, NodeName: opts.NodeName,
		Recorder: recorder, Grace: stopGrace, Log: mgr.GetLogger().WithName("adopt"),
	})
}
