package approval

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

// testSelector is the policy under test: the pool "web".
const testSelector = poolKey + "=web"

// TestMain starts a control plane with the cluster side's credentials
// (config/nodewatch) and the policy running as its service account, as
// in a cluster: what its RBAC refuses shows here.
func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		if err := start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

func start(ctx context.Context) error {
	cfg, err := env.AsClusterSide(ctx)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	sel, err := labels.Parse(testSelector)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("unitlet-approval"), Selector: sel}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}
