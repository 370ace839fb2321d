// Package testenv starts a real control plane (the kube-apiserver and etcd
// that hack/build-control-plane.sh builds into bin/) for a test package.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/frontproxy"
)

// Env is a running control plane with the unitlet CRDs installed.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// RepoRoot is the checkout's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Main is a test package's TestMain when a control plane is all it
// needs: it starts one into *env, runs the tests, stops it and exits.
func Main(m *testing.M, env **Env) {
	var err error
	if *env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = (*env).Stop()
	os.Exit(code)
}

// Start brings up kube-apiserver + etcd and installs config/crd/bases.
// It fails with a hint when the binaries have not been built yet.
func Start() (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(RepoRoot(), "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s missing in %s (run `make control-plane`): %w", b, assets, err)
		}
	}
	// The aggregator's trust, so the relay can serve behind this API
	// server as it does behind a cluster's.
	fpDir, err := os.MkdirTemp("", "unitlet-front-proxy-")
	if err != nil {
		return nil, err
	}
	fp, err := frontproxy.Write(fpDir)
	if err != nil {
		return nil, err
	}
	e, cfg, err := StartEnvironment(func() *envtest.Environment {
		e := &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
		}
		for k, v := range fp.APIServerFlags() {
			e.ControlPlane.GetAPIServer().Configure().Set(k, v)
		}
		return e
	})
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Env{Environment: e, Config: cfg, Client: c}, nil
}

// StartEnvironment starts the control plane of an environment made by
// newEnv, with a minute for each of its processes to start. envtest
// waits a fixed 5 s for the API server's default namespace; on a machine
// whose cores are all taken (make test runs several suites beside an
// emulated guest) that can pass while the server is fine. A control
// plane that missed it is stopped and started anew, from a new
// environment, up to three times.
func StartEnvironment(newEnv func() *envtest.Environment) (*envtest.Environment, *rest.Config, error) {
	for attempt := 1; ; attempt++ {
		e := newEnv()
		if e.ControlPlaneStartTimeout == 0 {
			e.ControlPlaneStartTimeout = time.Minute
		}
		cfg, err := e.Start()
		if err == nil {
			return e, cfg, nil
		}
		_ = e.Stop()
		if attempt == 3 || !strings.Contains(err.Error(), "default namespace didn't register") {
			return nil, nil, fmt.Errorf("start control plane: %w", err)
		}
	}
}
