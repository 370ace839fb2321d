// Package e2e runs the real unitlet binary as node agents against a real
// API server, with the direct backend, real cgroups, real sockets and the
// sample apps, as a user would after `make run`.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/cgroups"
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
	return m.Run()
}

// pollEvery is how often a wait looks again.
const pollEvery = 100 * time.Millisecond

func agentBinary() string { return testutil.AgentBinary() }

// agent is one running unitlet process acting as a node.
type agent struct {
	node, stateRoot, runRoot, cgroupRoot, logPath, probeAddr string
	cmd                                                      *exec.Cmd
	// metrics: serve /metrics on metricsAddr (loopback); off by default.
	metrics     bool
	metricsAddr string
}

func freePort(t *testing.T) string {
	t.Helper()
	return testutil.FreePort(t)
}

// startAgent runs bin/unitlet as node name until the test ends; at the end
// its cgroups are swept. opts adjust the agent before its first launch.
func startAgent(t *testing.T, name string, opts ...func(*agent)) *agent {
	t.Helper()
	short := name + "-" + runID
	a := &agent{
		node:       name,
		stateRoot:  filepath.Join(t.TempDir(), "state"),
		runRoot:    "/dev/shm/ule2e-" + short, // sockets need short paths
		cgroupRoot: "unitlet-e2e-" + short,
		logPath:    filepath.Join(t.TempDir(), "agent.log"),
	}
	t.Cleanup(func() {
		idle := a.idleChildren(t)
		a.stop(syscall.SIGTERM)
		expectReaped(t, idle)
		if t.Failed() {
			if b, err := os.ReadFile(a.logPath); err == nil {
				t.Logf("agent %s log (tail):\n%s", name, testutil.Tail(string(b), 60))
			}
		}
		a.sweep(t)
	})
	for _, o := range opts {
		o(a)
	}
	a.launch(t)
	return a
}

// launch starts the agent process (again, after a stop: same roots).
func (a *agent) launch(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	a.probeAddr, a.metricsAddr = freePort(t), "0"
	if a.metrics {
		a.metricsAddr = freePort(t)
	}
	a.cmd = exec.Command(agentBinary(),
		"--node-name", a.node, "--kubeconfig", kubeconfig,
		"--state-root", a.stateRoot, "--run-root", a.runRoot, "--cgroup-root", a.cgroupRoot,
		"--unit-backend", "direct", "--require-enrollment=false", "--socket-group", proxyGroup,
		"--health-probe-bind-address", a.probeAddr, "--metrics-bind-address", a.metricsAddr, "--metrics-secure=false")
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent "+a.node+" healthy", 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + a.probeAddr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// stop ends the agent process with sig (SIGKILL: as a crash would) and
// waits for it; the units it started live on.
func (a *agent) stop(sig syscall.Signal) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
	a.cmd = nil
}

// sweep kills and removes whatever this agent's cgroup root still holds
// (a test that failed half-way) and its run root.
func (a *agent) sweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, a.cgroupRoot, nil)
	if err != nil {
		t.Logf("sweep %s: %v", a.cgroupRoot, err)
	}
	_ = os.RemoveAll(a.runRoot)
}

func eventually(t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, what, limit, pollEvery, cond)
}
