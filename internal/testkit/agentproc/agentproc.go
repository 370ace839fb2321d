// Package agentproc runs the real unitlet binary as a node agent for a
// test: its roots, its flags, a crash (SIGKILL) or a stop, and the sweep
// of what a failed test left in its cgroup root.
package agentproc

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/layout"
)

// Agent is one unitlet process acting as node Node.
type Agent struct {
	Node, Kubeconfig                        string
	StateRoot, RunRoot, CgroupRoot, LogPath string
	ProbeAddr, MetricsAddr                  string
	// AppIDs is the uids its apps get, apart from every other agent's on
	// this machine (claimIDs).
	AppIDs identity.Range
	// Metrics serves /metrics (plain, loopback) on MetricsAddr when set.
	Metrics bool
	// Args follow the defaults on the command line: a flag given again
	// there wins.
	Args []string
	Cmd  *exec.Cmd
	// exited closes once Cmd has ended (and is reaped).
	exited chan struct{}
}

// New names the roots of an agent for node: a state root under the test's
// temp dir, a short run root in /dev/shm (sockets need short paths), a
// cgroup root and a range of app uids of its own; tag keeps one run's
// apart from another's.
func New(t testing.TB, node, tag, kubeconfig string) *Agent {
	short := node + "-" + tag
	return &Agent{
		Node: node, Kubeconfig: kubeconfig, AppIDs: claimIDs(t),
		StateRoot:  filepath.Join(t.TempDir(), "state"),
		RunRoot:    "/dev/shm/ul-" + short,
		CgroupRoot: "unitlet-test-" + short,
		LogPath:    filepath.Join(t.TempDir(), "agent.log"),
	}
}

// Layout is where this agent puts what it runs.
func (a *Agent) Layout() layout.Layout {
	return layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}
}

// Start starts the agent process (again, after a stop: same roots)
// without waiting for it; its output is appended to LogPath.
func (a *Agent) Start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	a.ProbeAddr, a.MetricsAddr = testutil.FreePort(t), "0"
	if a.Metrics {
		a.MetricsAddr = testutil.FreePort(t)
	}
	args := append([]string{
		"--node-name", a.Node, "--kubeconfig", a.Kubeconfig,
		"--state-root", a.StateRoot, "--run-root", a.RunRoot, "--cgroup-root", a.CgroupRoot, "--app-ids", a.AppIDs.String(),
		"--unit-backend", "direct", "--require-enrollment=false", "--serve-address", "127.0.0.1:0",
		"--health-probe-bind-address", a.ProbeAddr, "--metrics-bind-address", a.MetricsAddr, "--metrics-secure=false",
	}, a.Args...)
	a.Cmd = exec.Command(testutil.AgentBinary(), args...)
	a.Cmd.Stdout, a.Cmd.Stderr = logf, logf
	if err := a.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), a.Cmd
	a.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// Ready reports whether /readyz answers 200, with what it said.
func (a *Agent) Ready() (bool, string) {
	resp, err := http.Get("http://" + a.ProbeAddr + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// Launch starts the agent and waits until it is ready.
func (a *Agent) Launch(t testing.TB) {
	t.Helper()
	a.Start(t)
	a.WaitReady(t, 30*time.Second)
}

// WaitReady waits until /readyz answers 200.
func (a *Agent) WaitReady(t testing.TB, limit time.Duration) {
	t.Helper()
	testutil.Eventually(t, "agent "+a.Node+" ready", limit, 100*time.Millisecond, a.Ready)
}

// Stop ends the agent with sig (SIGKILL: as a crash would) and waits for
// it; the units it started live on.
func (a *Agent) Stop(sig syscall.Signal) {
	if a.Cmd == nil || a.Cmd.Process == nil {
		return
	}
	_ = a.Cmd.Process.Signal(sig)
	select {
	case <-a.exited:
	case <-time.After(15 * time.Second):
		_ = a.Cmd.Process.Kill()
		<-a.exited
	}
	a.Cmd = nil
}

// Running reports whether the process is started and has not ended.
func (a *Agent) Running() bool {
	if a.Cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// Sweep kills and removes whatever the cgroup root still holds (a test
// that failed half-way) and the run root.
func (a *Agent) Sweep(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, a.CgroupRoot, nil); err != nil {
		t.Logf("sweep %s: %v", a.CgroupRoot, err)
	}
	_ = os.RemoveAll(a.RunRoot)
}

// LogTail is the last n lines of the agent's output.
func (a *Agent) LogTail(n int) string {
	b, err := os.ReadFile(a.LogPath)
	if err != nil {
		return err.Error()
	}
	return testutil.Tail(string(b), n)
}
