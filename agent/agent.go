package agent

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/unitlet/unitlet/agent/metricsauth"
	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/lazylog"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/version"
)

// Main runs the agent until SIGTERM/SIGINT and returns the exit code.
func Main(args []string) int {
	opts, err := Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "unitlet: %v\n", err)
		return 2
	}
	log := newLogger(&opts.Zap)
	ctrl.SetLogger(log)
	if err := Run(ctrl.SetupSignalHandler(), opts, log); err != nil {
		log.Error(err, "agent stopped")
		return 1
	}
	return 0
}

// newLogger builds the logger the --zap-* flags describe: JSON at info by
// default, console at debug with --zap-devel; values added to it are
// encoded only for a line written (lazylog).
func newLogger(o *zap.Options) logr.Logger { return lazylog.Wrap(zap.New(zap.UseFlagOptions(o))) }

// Run starts the manager for opts and blocks until ctx ends.
func Run(ctx context.Context, opts Options, log logr.Logger) error {
	return run(ctx, opts, log, defaultJoining())
}

func run(ctx context.Context, opts Options, log logr.Logger, j joining) error {
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	if err := apiLimits(cfg, opts.APIQPS, opts.APIBurst); err != nil {
		return err
	}
	if err := waitForAPI(ctx, cfg, opts.ProbeAddr, log); err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	byObject := controllers.NodeCache(opts.NodeName)
	// Its own Enrollment only, which the RBAC and policy allow.
	byObject[&v1.Enrollment{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName)}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(),
		// The probes are served by setupEnrollment's probeServer, which
		// also answers /hostingz with the stage.
		HealthProbeBindAddress:  "0",
		GracefulShutdownTimeout: ptr.To(gracefulShutdown),
		Metrics:                 metricsOptions(opts),
		PprofBindAddress:        opts.PprofAddr,
		Cache: cache.Options{
			// managedFields are the larger half of a cached Instance and
			// nothing here reads them; an update without them keeps the
			// server's.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         byObject,
		},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	exit := &atExit{}
	opts.atExit = exit
	// A failure the agent cannot go on after (the hosting reconcilers
	// could not be registered) stops the manager with its cause.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if err := setupEnrollment(mgr, opts, log, j, stop); err != nil {
		return errors.Join(err, exit.run())
	}
	log.Info("agent starting", "node", opts.NodeName, "version", version.Get(),
		"stateRoot", opts.StateRoot, "runRoot", opts.RunRoot, "cgroupRoot", opts.CgroupRoot,
		"unitBackend", opts.UnitBackend, "requireEnrollment", opts.RequireEnrollment)
	err = mgr.Start(ctx)
	if cerr := exit.run(); cerr != nil {
		log.Error(cerr, "closing the node runtime")
	}
	if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// metricsOptions serves the metrics over HTTPS to callers the API server
// authenticates (TokenReview) and authorizes (SubjectAccessReview for GET
// /metrics), as the kubelet's are; plain HTTP only when asked
// (--metrics-secure=false, for `make run` on loopback).
func metricsOptions(opts Options) metricsserver.Options {
	if !opts.MetricsSecure {
		return metricsserver.Options{BindAddress: opts.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    opts.MetricsAddr,
		SecureServing:  true,
		FilterProvider: metricsauth.Provider,
	}
}
