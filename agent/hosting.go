package agent

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/unitlet/unitlet/agent/endpoint"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/version"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/layout"
)

// stopGrace is how long a retiring generation has between SIGTERM and
// the kill.
const stopGrace = 10 * time.Second

// On the agent's own SIGTERM, proofs in flight get shutdownBudget, inside
// the manager's graceful shutdown (gracefulShutdown) and the pod's
// terminationGracePeriodSeconds (30 s): a proof cut short is reported
// Unproven, with the finalizer kept, before the agent goes (the status
// write that says so has 5 s of its own after the budget).
const (
	shutdownBudget   = 15 * time.Second
	gracefulShutdown = 25 * time.Second
)

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
	if err := mgr.Add(shutdownOnStop(rt, shutdownBudget)); err != nil {
		return err
	}
	log.Info("node runtime ready", "unitBackend", backend)
	metrics.SetAgentInfo(opts.NodeName, version.Get(), backend)
	metrics.SetUsageSource(usageSource(rt))
	recorder := mgr.GetEventRecorder("unitlet-agent")
	if opts.ServeAddr != "" && opts.ServeAddr != "0" {
		err := mgr.Add(&endpoint.Server{
			Addr: opts.ServeAddr, Advertise: opts.AdvertiseAddr, NodeName: opts.NodeName,
			Client: mgr.GetClient(), RelayCA: mgr.GetAPIReader(), RelayCANamespace: opts.RelayCANamespace,
			Node: rt, Recorder: recorder, Grace: stopGrace, Log: mgr.GetLogger().WithName("server"),
		})
		if err != nil {
			return err
		}
	}
	lay := layout.Layout{StateRoot: opts.StateRoot}
	return controllers.SetupHosting(mgr, controllers.Hosting{
		Runtime: rt, NodeName: opts.NodeName, KeyNamespace: opts.KeyNamespace, Recorder: recorder, Gate: opts.Gate, Grace: stopGrace,
		Boot: &boot.Record{Path: lay.BootRecord(), PendingPath: lay.BootPending(), Source: opts.BootIDFile},
	})
}

// shutdownOnStop waits for the manager to stop (the agent's SIGTERM) and
// then bounds rt's proofs by budget.
func shutdownOnStop(rt interface{ Shutdown(context.Context) }, budget time.Duration) manager.RunnableFunc {
	return func(ctx context.Context) error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), budget)
		context.AfterFunc(sctx, cancel)
		rt.Shutdown(sctx)
		return nil
	}
}
