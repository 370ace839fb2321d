// Package e2e runs the real unitlet binary as node agents against a real
// API server, with the direct backend, real cgroups, real sockets and the
// sample apps, as a user would after `make run`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/relayproc"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

var (
	env        *testenv.Env
	k8s        client.Client
	kubeconfig string
	// kube is how the helpers read and change objects; set with k8s.
	kube testutil.API
	// runID keeps this run's roots and cgroups apart from any other.
	runID = strconv.Itoa(os.Getpid())
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, err := testutil.Preflight("e2e", "the agent creates cgroups")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	kube = testutil.API{Client: k8s, Every: pollEvery}
	// The cluster side's key minter, as `unitlet cluster` runs it: no
	// Instance makes a generation without its key.
	keyCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	if err := keyminter.Start(keyCtx, env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	user, err := env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	raw, err := user.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "unitlet-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The relay, as make run has it: `kubectl unitlet` reaches the
	// agents only through the API server and it.
	r, err := relayproc.Start(context.Background(), k8s, env.Config, kubeconfig, filepath.Join(dir, "relay.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Stop()
	return m.Run()
}

// pollEvery is how often a wait looks again.
const pollEvery = 100 * time.Millisecond

// agent is one running unitlet process acting as a node, with the e2e
// suite's flags (no enrollment, the proxy's socket group).
type agent struct {
	*agentproc.Agent
}

// startAgent runs bin/unitlet as node name until the test ends; at the end
// its cgroups are swept. opts adjust the agent before its first launch.
func startAgent(t *testing.T, name string, opts ...func(*agent)) *agent {
	t.Helper()
	a := &agent{agentproc.New(t, name, runID, kubeconfig)}
	a.Args = []string{"--socket-group", proxyGroup}
	t.Cleanup(func() {
		idle := a.idleChildren(t)
		a.Stop(syscall.SIGTERM)
		expectReaped(t, idle)
		if t.Failed() {
			t.Logf("agent %s log (tail):\n%s", name, a.LogTail(60))
		}
		a.Sweep(t)
	})
	for _, o := range opts {
		o(a)
	}
	a.Launch(t)
	return a
}
