// Package cluster is the wiring of what runs once per cluster (its own
// Deployment, `unitlet cluster`): one manager holding the cluster-side
// controllers: nodewatch (cluster/nodewatch), which reads the agents'
// node Leases, and instancekey (cluster/instancekey), which mints each
// Instance's key. Nothing here links the node side (agent/,
// controllers/, runtime/): hack/import-restrictions.yaml holds it so.
package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/unitlet/unitlet/cluster/instancekey"
	"github.com/unitlet/unitlet/cluster/nodewatch"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/version"
)

// Main runs `unitlet cluster` until SIGTERM and returns the exit code.
func Main(args []string) int {
	fs := flag.NewFlagSet("unitlet cluster", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means in-cluster configuration or $KUBECONFIG")
	leaseNS := fs.String("lease-namespace", "unitlet-system", "namespace of the agents' Leases")
	keyNS := fs.String("key-namespace", instancekey.DefaultNamespace, "namespace of the Instances' key Secrets (the agents' --key-namespace)")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	metricsAddr := fs.String("metrics-bind-address", "0", "address of the metrics endpoint; 0 disables it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := zap.New()
	ctrl.SetLogger(log)
	if err := run(ctrl.SetupSignalHandler(), *kubeconfig, *leaseNS, *keyNS, *probeAddr, *metricsAddr); err != nil {
		fmt.Fprintf(os.Stderr, "unitlet cluster: %v\n", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, kubeconfig, leaseNS, keyNS, probeAddr, metricsAddr string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if kubeconfig == "" {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		HealthProbeBindAddress: probeAddr,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		// The agents' Leases only, not every Lease of the cluster; the key
		// Secrets only, not every Secret.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{leaseNS: {}}},
			&corev1.Secret{}:        {Namespaces: map[string]cache.Config{keyNS: {}}},
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
	r := &nodewatch.Reconciler{Client: mgr.GetClient(), LeaseNamespace: leaseNS}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	keys := &instancekey.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), KeyNamespace: keyNS,
		Recorder: mgr.GetEventRecorder("unitlet-cluster")}
	if err := keys.SetupWithManager(mgr); err != nil {
		return err
	}
	ctrl.Log.WithName("cluster").Info("cluster-side controllers starting", "version", version.Get(), "leaseNamespace", leaseNS, "keyNamespace", keyNS)
	return mgr.Start(ctx)
}
