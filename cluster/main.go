// Package cluster is the wiring of what runs once per cluster (its own
// Deployment, `unitlet cluster`): one manager holding the cluster-side
// controllers: nodewatch (cluster/nodewatch), which reads the agents'
// node Leases; placement (cluster/placement), which binds Instances to
// nodes and moves them; moves (cluster/moves), which finishes a move on
// the old node; instancekey (cluster/instancekey), which mints each
// Instance's key; and, with --approve-nodes, approval (cluster/approval),
// which approves the Enrollments of matching nodes. Leader-elected: of
// the Deployment's replicas, one decides at a time. Nothing here links the node side (agent/,
// controllers/, runtime/): hack/import-restrictions.yaml holds it so.
package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/unitlet/unitlet/cluster/approval"
	"github.com/unitlet/unitlet/cluster/instancekey"
	"github.com/unitlet/unitlet/cluster/moves"
	"github.com/unitlet/unitlet/cluster/nodewatch"
	"github.com/unitlet/unitlet/cluster/placement"
	"github.com/unitlet/unitlet/internal/lazylog"
	"github.com/unitlet/unitlet/internal/logflags"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/version"
)

// Main runs `unitlet cluster` until SIGTERM and returns the exit code.
func Main(args []string) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "unitlet cluster: %v\n", err)
		return 2
	}
	log := lazylog.Wrap(zap.New(zap.UseFlagOptions(&o.zap)))
	ctrl.SetLogger(log)
	if _, _, err := approval.Parse(o.approveNodes); err != nil {
		fmt.Fprintf(os.Stderr, "unitlet cluster: %v\n", err)
		return 2
	}
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		fmt.Fprintf(os.Stderr, "unitlet cluster: %v\n", err)
		return 1
	}
	return 0
}

// parse reads the flags of `unitlet cluster`, controller-runtime's --zap-*
// logging flags among them.
func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("unitlet cluster", flag.ContinueOnError)
	o := options{}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration or $KUBECONFIG")
	fs.StringVar(&o.leaseNS, "lease-namespace", "unitlet-system", "namespace of the agents' Leases")
	fs.StringVar(&o.keyNS, "key-namespace", instancekey.DefaultNamespace, "namespace of the Instances' key Secrets (the agents' --key-namespace)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint; 0 disables it")
	fs.DurationVar(&o.moveSettle, "move-settle", moves.DefaultSettle, "how long after a moved Instance serves on its new node the old node's generations are retired (front ends following status move in that time)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader (a Lease "+leaderElectionID+"), so that of several replicas one runs the controllers")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader's Lease; empty means --lease-namespace")
	fs.StringVar(&o.spreadLabel, "spread-label", placement.DefaultSpreadLabel, "Instance label whose value placement spreads across nodes (with the namespace)")
	fs.StringVar(&o.approveNodes, "approve-nodes", "", "label selector: approve the Enrollment of each node whose Node matches it (empty: off); "+
		"use node-restriction.kubernetes.io/ keys, which a kubelet cannot set on its own Node")
	logflags.Bind(fs, &o.zap)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.leaderNS == "" {
		o.leaderNS = o.leaseNS
	}
	return o, nil
}

// leaderElectionID names the Lease the replicas elect their leader with.
const leaderElectionID = "unitlet-cluster"

type options struct {
	kubeconfig, leaseNS, keyNS, probeAddr, metricsAddr string
	leaderElect                                        bool
	leaderNS, spreadLabel, approveNodes                string
	moveSettle                                         time.Duration
	zap                                                zap.Options
}

func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if o.kubeconfig == "" {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
		HealthProbeBindAddress:  o.probeAddr,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.leaderNS,
		// A leader that steps down (SIGTERM in a rollout) lets the other
		// replica take over at once rather than after the Lease's term.
		LeaderElectionReleaseOnCancel: true,
		// The agents' Leases only, not every Lease of the cluster; the key
		// Secrets only, not every Secret.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{o.leaseNS: {}}},
			&corev1.Secret{}:        {Namespaces: map[string]cache.Config{o.keyNS: {}}},
		}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	r := &nodewatch.Reconciler{Client: mgr.GetClient(), LeaseNamespace: o.leaseNS}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	mv := &moves.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("unitlet-moves"), Settle: o.moveSettle}
	if err := mv.SetupWithManager(mgr); err != nil {
		return err
	}
	claims := &moves.ClaimReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	if err := claims.SetupWithManager(mgr); err != nil {
		return err
	}
	p := &placement.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("unitlet-placement"), LeaseNamespace: o.leaseNS, SpreadLabel: o.spreadLabel}
	if err := p.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	keys := &instancekey.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), KeyNamespace: o.keyNS,
		Recorder: mgr.GetEventRecorder("unitlet-keys")}
	if err := keys.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupApproval(mgr, o.approveNodes); err != nil {
		return err
	}
	ctrl.Log.WithName("cluster").Info("cluster-side controllers starting", "version", version.Get(),
		"leaseNamespace", o.leaseNS, "keyNamespace", o.keyNS, "leaderElect", o.leaderElect, "spreadLabel", o.spreadLabel)
	return mgr.Start(ctx)
}

// setupApproval runs the approval policy when --approve-nodes is set,
// warning of each selector key a kubelet may set on its own Node.
func setupApproval(mgr ctrl.Manager, selector string) error {
	log := ctrl.Log.WithName("approval")
	sel, warnings, err := approval.Parse(selector)
	if err != nil || sel == nil {
		return err
	}
	for _, w := range warnings {
		log.Info("WARNING: "+w, "selector", sel.String())
	}
	log.Info("approving the Enrollments of the nodes whose Node matches", "selector", sel.String())
	a := &approval.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("unitlet-approval"), Selector: sel}
	return a.SetupWithManager(mgr)
}
