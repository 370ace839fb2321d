package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/cgroups"
)

// rebootFigures: the node rebooted under N settled Instances, timed from
// the new agent's start. Serving (every stable socket answers a request,
// polled from the node) is apart from reported (every Instance Ready in
// the API for a generation of the new boot).
type rebootFigures struct {
	// AgentUp: the agent's start → its /readyz.
	AgentUp float64 `json:"agentUpSeconds"`
	// Serving: per Instance, the agent's start → its stable socket's first
	// answer; All when the last answered.
	Serving phase `json:"serving"`
	// Reported: the agent's start → Ready in the API, as the client's
	// watch sees it, with the agent's and the API server's work over it.
	Reported phase `json:"reported"`
	// StillServing: how many answered again once every one was reported
	// (a socket that answered and then stopped served only for a moment).
	StillServing int `json:"stillServing"`
	// StartMean: the new agent's starts (its own metric, every one since
	// it started), mean seconds, and how many: what serving is made of.
	StartMean float64 `json:"startMeanSeconds"`
	Starts    float64 `json:"starts"`
}

// phaseReboot reboots the node under the settled Instances the way
// test/chaos's TestReboot does on the direct backend: the agent killed,
// every process under its cgroup root killed and the cgroups removed,
// the run root (a tmpfs on a real node) removed, the state root kept,
// and the boot ID the agent reads changed. Then the agent starts again.
func phaseReboot(ctx context.Context, h *harness, r *results) error {
	if err := h.waitQueuesEmpty(ctx, 10*time.Second); err != nil {
		return err
	}
	ns := names("app", h.o.n)
	before, err := h.activeGenerations(ctx)
	if err != nil {
		return err
	}
	if err := h.reboot(ctx); err != nil {
		return err
	}
	f := &rebootFigures{}
	r.Reboot = f
	// A generation of the new boot is numbered after every one of the old.
	newBoot := func(i *v1.Instance) bool { return i.Status.ActiveGeneration > before[i.Name] && served(0)(i) }
	tr, stopTrack, err := h.track(ctx, ns, newBoot)
	if err != nil {
		return err
	}
	defer stopTrack()
	srv0, _ := h.apiserverRequests(ctx)
	mark := markCPU(h.lay.CgroupRoot)
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	t0 := time.Now()
	serving := make(chan map[string]time.Time, 1)
	go func() { serving <- h.pollServing(pctx, ns) }()
	if err := h.startAgent(ctx, h.exe, h.kubeconfigPath); err != nil {
		return err
	}
	f.AgentUp = time.Since(t0).Seconds()
	h.profile("reboot", 20)

	werr := tr.wait(ctx, h.o.phaseLimit)
	p := &f.Reported
	p.All = time.Since(t0).Seconds()
	stopPoll()
	served := <-serving
	f.StillServing = h.answering(ns)
	cpu1, rss, _ := h.agentUsage()
	mark.since(p, h.lay.CgroupRoot)
	srv1, _ := h.apiserverRequests(ctx)
	p.ServerRequests = perInstance(srv0, srv1, len(ns))
	req1, _ := h.apiRequests() // a new agent: its counter began at 0
	p.AgentCPU, p.AgentPeakRSS, p.APIRequestsPerInstance = cpu1.Seconds(), rss, req1/float64(len(ns))
	p.P50, p.P90, p.P99, p.Reached = sinceAll(t0, tr.times())
	sum, _ := h.metric(metrics.NameStartDuration + "_sum")
	if f.Starts, _ = h.metric(metrics.NameStartDuration + "_count"); f.Starts > 0 {
		f.StartMean = sum / f.Starts
	}
	s := &f.Serving
	s.P50, s.P90, s.P99, s.Reached = sinceAll(t0, served)
	for _, at := range served {
		s.All = max(s.All, at.Sub(t0).Seconds())
	}
	if s.Reached < len(ns) {
		return fmt.Errorf("%d of %d stable sockets answered by the time %d were reported: %w", s.Reached, len(ns), p.Reached, werr)
	}
	return werr
}

// sinceAll is the percentiles of each time since t0, and how many.
func sinceAll(t0 time.Time, at map[string]time.Time) (p50, p90, p99 float64, n int) {
	var d []time.Duration
	for _, t := range at {
		d = append(d, t.Sub(t0))
	}
	p50, p90, p99 = testutil.Percentiles(d)
	return p50, p90, p99, len(d)
}

// activeGenerations is each Instance's serving generation now.
func (h *harness) activeGenerations(ctx context.Context) (map[string]int64, error) {
	var list v1.InstanceList
	if err := h.c.List(ctx, &list, client.InNamespace(benchNS)); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(list.Items))
	for _, i := range list.Items {
		if !meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady) {
			return nil, fmt.Errorf("%s is not Ready before the reboot", i.Name)
		}
		out[i.Name] = i.Status.ActiveGeneration
	}
	return out, nil
}

// reboot does to the node what a reboot would, the agent first (SIGKILL:
// a reboot lets nothing finish), and gives it a new boot ID.
func (h *harness) reboot(ctx context.Context) error {
	_ = h.agent.Process.Kill()
	_ = h.agent.Wait()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	proofs, err := cgroups.SweepStale(sctx, cgroups.Config{Root: "."}, h.lay.CgroupRoot, nil)
	if err != nil {
		return fmt.Errorf("kill what the old boot ran: %w", err)
	}
	for _, p := range proofs {
		if !p.Proven {
			return fmt.Errorf("kill what the old boot ran: %w", p.AsError())
		}
	}
	if err := os.RemoveAll(h.lay.RunRoot); err != nil {
		return err
	}
	return writeBootID(h.bootFile)
}

// writeBootID gives the node a new boot ID, as the kernel does at boot.
func writeBootID(path string) error {
	return os.WriteFile(path, []byte(string(uuid.NewUUID())+"\n"), 0o644)
}

// pollServing asks every Instance's stable socket, over and over, until
// each answered once or ctx ends; it returns when each first answered.
func (h *harness) pollServing(ctx context.Context, ns []string) map[string]time.Time {
	at := make(map[string]time.Time, len(ns))
	socks := h.stableSockets(ns)
	for ctx.Err() == nil && len(at) < len(ns) {
		for i, n := range ns {
			if _, done := at[n]; !done && answers(socks[i]) {
				at[n] = time.Now()
			}
		}
		sleep(ctx, 20*time.Millisecond)
	}
	return at
}

// answering counts the stable sockets that answer now, on 8 workers.
func (h *harness) answering(ns []string) int {
	socks := h.stableSockets(ns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	count, work := 0, make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if answers(s) {
					mu.Lock()
					count++
					mu.Unlock()
				}
			}
		}()
	}
	for _, s := range socks {
		work <- s
	}
	close(work)
	wg.Wait()
	return count
}

func (h *harness) stableSockets(ns []string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		li, err := h.lay.Instance(benchNS, n)
		if err == nil {
			out[i] = li.StableSocket()
		}
	}
	return out
}

// answers: an HTTP request on the socket gets the app's 200. A stat
// first: a socket that is not there yet costs no connection.
func answers(sock string) bool {
	if _, err := os.Stat(sock); err != nil || sock == "" {
		return false
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	host := strings.TrimSuffix(filepath.Base(filepath.Dir(sock)), "/") + ".bench.test"
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "HTTP/1.1 200")
}
