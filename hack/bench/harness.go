package main

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

const (
	benchNS  = "bench"
	nodeName = "bench"
)

// harness is the control plane, the agent and where they keep things.
type harness struct {
	env     *testenv.Env
	appDir  string
	c       client.WithWatch
	dir     string // scratch: kubeconfig, agent log
	shm     string // the app binary and the raw baseline's sockets (visible in the sandbox)
	app     string
	lay     layout.Layout
	agent   *exec.Cmd
	metrics string // the agent's metrics address
	pprof   string // the agent's /debug/pprof address
	// agentCfg is the agent's credentials (the floor's client uses them).
	agentCfg *rest.Config
	// exe and kubeconfigPath start the agent (again, after a reboot);
	// bootFile is the boot ID it reads, which the reboot changes.
	exe, kubeconfigPath, bootFile string
	o                             options
}

func setup(ctx context.Context, o options) (_ *harness, err error) {
	exe := o.agent
	if _, err := os.Stat(exe); err != nil {
		return nil, fmt.Errorf("%s missing: run `make build` first", exe)
	}
	h := &harness{o: o, exe: exe}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	if h.dir, err = os.MkdirTemp("", "unitlet-bench-"); err != nil {
		return nil, err
	}
	h.shm = fmt.Sprintf("/dev/shm/unitlet-bench-%d", os.Getpid())
	if err := os.MkdirAll(h.shm, 0o755); err != nil {
		return nil, err
	}
	// The app's binary in the checkout's bin/: an app's sandbox has its own
	// /dev/shm, /tmp and /var/tmp, where it would not find it.
	h.appDir = filepath.Join(testenv.RepoRoot(), "bin", fmt.Sprintf("bench-app-%d", os.Getpid()))
	if err := os.MkdirAll(h.appDir, 0o755); err != nil {
		return nil, err
	}
	if h.app, err = tinyapp.Build(h.appDir); err != nil {
		return nil, err
	}
	if h.env, err = testenv.Start(); err != nil {
		return nil, err
	}
	cfg := *h.env.Config
	cfg.QPS, cfg.Burst = 1000, 2000 // the bench's client is not what is measured
	if h.c, err = client.NewWithWatch(&cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	// The agents' own namespace holds their node Leases, as config/default
	// makes it: without it an idle agent retries creating its Lease.
	for _, ns := range []string{benchNS, agentNS} {
		if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	if h.kubeconfigPath, err = h.kubeconfig(ctx); err != nil {
		return nil, err
	}
	h.bootFile = filepath.Join(h.dir, "boot_id")
	if err := writeBootID(h.bootFile); err != nil {
		return nil, err
	}
	if err := h.startKeyMinter(ctx); err != nil {
		return nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	h.lay = layout.Layout{StateRoot: filepath.Join(h.dir, "state"), RunRoot: "/dev/shm/ulb-" + pid, CgroupRoot: "unitlet-bench-" + pid}
	if h.metrics, err = freeAddr(); err != nil {
		return nil, err
	}
	if h.pprof, err = freeAddr(); err != nil {
		return nil, err
	}
	if err := h.startAgent(ctx, exe, h.kubeconfigPath); err != nil {
		return h, err
	}
	if err := h.waitLevel(ctx, h.agentCfg, agentLevel); err != nil {
		return h, fmt.Errorf("the agent's credentials: %w", err)
	}
	return h, nil
}

func freeAddr() (string, error) {
	port, err := testutil.FreeTCPPort()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), err
}

// kubeconfig is the agent's: it authenticates as the DaemonSet's
// ServiceAccount does, so config/flowcontrol's FlowSchema (applied first)
// decides its requests as in a cluster.
func (h *harness) kubeconfig(ctx context.Context) (string, error) {
	if err := h.applyFlowControl(ctx); err != nil {
		return "", fmt.Errorf("config/flowcontrol: %w", err)
	}
	user, err := h.saUser(ctx, agentNS, agentSA)
	if err != nil {
		return "", err
	}
	h.agentCfg = user.Config()
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(h.dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

func (h *harness) startAgent(ctx context.Context, exe, kubeconfig string) error {
	// Appended: an agent started again after the reboot keeps the first's log.
	logf, err := os.OpenFile(filepath.Join(h.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	probe, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"--node-name", nodeName, "--kubeconfig", kubeconfig,
		"--state-root", h.lay.StateRoot, "--run-root", h.lay.RunRoot, "--cgroup-root", h.lay.CgroupRoot,
		"--unit-backend", "direct", "--require-enrollment=false", "--socket-group", "root",
		"--health-probe-bind-address", probe, "--metrics-bind-address", h.metrics, "--metrics-secure=false",
		"--pprof-bind-address", h.pprof, "--boot-id-file", h.bootFile}
	if h.o.qps > 0 {
		args = append(args, "--kube-api-qps", strconv.Itoa(h.o.qps), "--kube-api-burst", strconv.Itoa(2*h.o.qps))
	}
	h.agent = exec.Command(exe, append(args, h.o.agentArgs...)...)
	h.agent.Stdout, h.agent.Stderr = logf, logf
	if err := h.agent.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the agent was not ready within 60 s; its log: %s", filepath.Join(h.dir, "agent.log"))
}

// close stops the agent and the control plane, and sweeps the agent's
// cgroup root: a phase that failed leaves its Instances' apps running (an
// agent that stops leaves its units to the next one), and nothing of a
// bench may outlive it.
func (h *harness) close() {
	if h.agent != nil && h.agent.Process != nil {
		_ = h.agent.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = h.agent.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = h.agent.Process.Kill()
		}
	}
	if h.lay.CgroupRoot != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, h.lay.CgroupRoot, nil); err != nil {
			fmt.Fprintln(os.Stderr, "bench: sweep", h.lay.CgroupRoot+":", err)
		}
		cancel()
	}
	if h.dir != "" {
		// The agent's log outlives the run, beside the figures.
		if b, err := os.ReadFile(filepath.Join(h.dir, "agent.log")); err == nil {
			_ = os.WriteFile(filepath.Join(filepath.Dir(h.o.jsonOut), "bench-agent.log"), b, 0o644)
		}
	}
	if h.env != nil {
		_ = h.env.Stop()
	}
	if h.shm != "" {
		_ = os.RemoveAll(h.shm)
	}
	if h.appDir != "" {
		_ = os.RemoveAll(h.appDir)
	}
	if h.lay.RunRoot != "" {
		_ = os.RemoveAll(h.lay.RunRoot)
	}
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
	}
}

// agentUsage is the agent's CPU time so far and its peak RSS.
func (h *harness) agentUsage() (cpu time.Duration, peakRSS int64, err error) {
	return procUsage(h.agent.Process.Pid)
}

// procUsage reads a process's user+system time and VmHWM.
func procUsage(pid int) (time.Duration, int64, error) {
	cpu, err := testutil.ProcessCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	return cpu, statusKiB(pid, "VmHWM") * 1024, nil
}

// statusKiB is a "<key>: N kB" line of /proc/<pid>/status.
func statusKiB(pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// apiRequests is the agent's count of API requests so far (client-go's
// rest_client_requests_total, every code and verb).
func (h *harness) apiRequests() (float64, error) { return h.metric("rest_client_requests_total") }

// metric sums every series of name on the agent's /metrics.
func (h *harness) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + h.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}
