package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
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

// clusterSA is the cluster side's service account (config/nodewatch).
const clusterSA = "system:serviceaccount:unitlet-system:unitlet-nodewatch"

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
	if err := installFiles(ctx, "config/default/namespace.yaml", "config/nodewatch/service_account.yaml",
		"config/nodewatch/role.yaml", "config/nodewatch/role_binding.yaml"); err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: clusterSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:unitlet-system", "system:authenticated"}}
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

// installFiles creates the objects of config files as admin.
func installFiles(ctx context.Context, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), f))
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("install %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}
