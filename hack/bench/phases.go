package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

func instanceName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }

// appCPU is the bench app's CPU tier (-app-cpu): the validated minimum by
// default, whose quota (5 ms per 100 ms) also bounds the trampoline that
// starts the app inside its cgroup.
var appCPU = resource.MustParse("50m")

func benchInstance(name, salt string, app string) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: name},
		Spec: v1.InstanceSpec{
			Host: name + ".bench.test", NodeName: nodeName, Strategy: v1.StrategyOverlap,
			Template: v1.Template{
				Command: []string{app}, Env: []v1.EnvVar{{Name: "SALT", Value: salt}},
				Tier:      v1.Tier{Memory: resource.MustParse("16Mi"), CPU: appCPU, Pids: 8}, // the validated minimum but -app-cpu
				Readiness: &v1.Readiness{HTTPGet: &v1.HTTPGetProbe{Path: "/healthz"}, TimeoutSeconds: 60},
			},
		},
	}
}

// served: Ready, serving generation want or a later one (a restart), and
// nothing under way (Reconciling gone). A swap's old generation retires
// after: its own status says when it is proven gone (alsoGeneration).
func served(want int64) func(*v1.Instance) bool {
	return func(i *v1.Instance) bool {
		return i.Status.ActiveGeneration >= want && i.Status.ObservedGeneration == i.Generation &&
			meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady) &&
			meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReconciling) == nil
	}
}

// parallel runs f for each name on 32 workers and records when each call
// began.
func parallel(names []string, f func(string) error) (map[string]time.Time, error) {
	began := make(map[string]time.Time, len(names))
	var mu sync.Mutex
	var first error
	work := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				at := time.Now()
				err := f(n)
				mu.Lock()
				began[n] = at
				if err != nil && first == nil {
					first = fmt.Errorf("%s: %w", n, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	return began, first
}

// alsoGeneration is a further condition a phase waits for, on one
// Generation of each Instance: an Instance is done once both are met.
type alsoGeneration struct {
	number int64
	cond   func(*v1.Generation) bool
}

// measured runs act under a tracker for cond (and also's, unless nil)
// and fills a phase's figures.
func (h *harness) measured(ctx context.Context, name string, names []string, cond func(*v1.Instance) bool, act func(string) error, also *alsoGeneration) (phase, error) {
	var p phase
	tr, stop, err := h.track(ctx, names, cond)
	if err != nil {
		return p, err
	}
	defer stop()
	var gtr *tracker
	genOf := func(n string) string { return "" }
	if also != nil {
		genOf = func(n string) string { return fmt.Sprintf("%s-g%d", n, also.number) }
		gnames := make([]string, len(names))
		for i, n := range names {
			gnames[i] = genOf(n)
		}
		var gstop func()
		if gtr, gstop, err = trackKind(ctx, h, generations, gnames, also.cond); err != nil {
			return p, err
		}
		defer gstop()
	}
	cpu0, _, _ := h.agentUsage()
	mark := markCPU(h.lay.CgroupRoot)
	req0, _ := h.apiRequests()
	srv0, _ := h.apiserverRequests(ctx)
	h.profile(name, 20)
	t0 := time.Now()
	began, err := parallel(names, act)
	if err != nil {
		return p, err
	}
	werr := tr.wait(ctx, h.o.phaseLimit)
	if werr == nil && gtr != nil {
		werr = gtr.wait(ctx, h.o.phaseLimit)
	}
	p.All = time.Since(t0).Seconds()
	cpu1, rss, _ := h.agentUsage()
	mark.since(&p, h.lay.CgroupRoot)
	req1, _ := h.apiRequests()
	srv1, _ := h.apiserverRequests(ctx)
	p.ServerRequests = perInstance(srv0, srv1, len(names))
	p.AgentCPU, p.AgentPeakRSS = (cpu1 - cpu0).Seconds(), rss
	p.APIRequestsPerInstance = (req1 - req0) / float64(len(names))
	var lat []time.Duration
	var gtimes map[string]time.Time
	if gtr != nil {
		gtimes = gtr.times()
	}
	for n, at := range tr.times() {
		if g, ok := gtimes[genOf(n)]; ok && g.After(at) {
			at = g
		} else if gtr != nil && !ok {
			continue // not done: its generation's condition is not met
		}
		lat = append(lat, at.Sub(began[n]))
	}
	p.P50, p.P90, p.P99 = testutil.Percentiles(lat)
	p.Reached, p.lat, p.began = len(lat), lat, began
	return p, werr
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = instanceName(prefix, i)
	}
	return out
}

func phaseCreate(ctx context.Context, h *harness, r *results) error {
	var err error
	r.Create, err = h.measured(ctx, "create", names("app", h.o.n), served(1), func(n string) error {
		return h.c.Create(ctx, benchInstance(n, "1", h.app))
	}, nil)
	h.heapProfile("create")
	r.AgentGoroutines, _ = h.metric("go_goroutines")
	heap, _ := h.metric("go_memstats_heap_inuse_bytes")
	stack, _ := h.metric("go_memstats_stack_inuse_bytes")
	r.AgentHeapMiB, r.AgentStackMiB = heap/(1<<20), stack/(1<<20)
	pid := h.agent.Process.Pid
	r.AgentRSSAnonMiB, r.AgentRSSFileMiB = float64(statusKiB(pid, "RssAnon"))/1024, float64(statusKiB(pid, "RssFile"))/1024
	r.AgentThreads = statusKiB(pid, "Threads")
	r.PlatformMiBPerInstance, r.AppMiBPerInstance = h.nodeMemory(h.o.n)
	sum, _ := h.metric(metrics.NameStartDuration + "_sum")
	count, _ := h.metric(metrics.NameStartDuration + "_count")
	if count > 0 {
		r.AgentStartMean = sum / count
	}
	return err
}

// phaseIdle watches the settled agent: API requests and CPU per minute.
// Settled: the client saw every Instance Ready, and then the agent's
// queues stayed empty for 10 s (it may still be writing what the client
// already sees).
func phaseIdle(ctx context.Context, h *harness, r *results) error {
	t0 := time.Now()
	if err := h.waitQueuesEmpty(ctx, 10*time.Second); err != nil {
		return err
	}
	r.SettleSeconds = time.Since(t0).Seconds()
	srv0, _ := h.apiserverRequests(ctx)
	h.profile("idle", int(h.o.idle.Seconds()))
	cpu0, _, err := h.agentUsage()
	if err != nil {
		return err
	}
	req0, err := h.apiRequests()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.o.idle):
	}
	cpu1, _, _ := h.agentUsage()
	req1, _ := h.apiRequests()
	srv1, _ := h.apiserverRequests(ctx)
	r.IdleServerRequests = perInstance(srv0, srv1, 1)
	min := h.o.idle.Minutes()
	r.IdleAPIRequestsPerMin, r.IdleCPUPerMin = (req1-req0)/min, (cpu1-cpu0).Seconds()/min
	return nil
}

// waitQueuesEmpty returns once every controller's workqueue held nothing
// for quiet (controller-runtime's workqueue_depth), or at the phase limit.
func (h *harness) waitQueuesEmpty(ctx context.Context, quiet time.Duration) error {
	deadline := time.Now().Add(h.o.phaseLimit)
	var since time.Time
	for time.Now().Before(deadline) {
		depth, err := h.metric("workqueue_depth")
		switch {
		case err != nil || depth > 0:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= quiet:
			return nil
		}
		sleep(ctx, 250*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("the agent's queues did not stay empty for %s within %s", quiet, h.o.phaseLimit)
}

func phaseSwap(ctx context.Context, h *harness, r *results) error {
	var err error
	// Done once generation 2 serves and generation 1 is proven gone: the
	// Instance's status says the first, generation 1's the second.
	gone := &alsoGeneration{number: 1, cond: func(g *v1.Generation) bool {
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated)
	}}
	r.Swap, err = h.measured(ctx, "swap", names("app", h.o.n), served(2), func(n string) error {
		inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: n}}
		patch := []byte(`{"spec":{"template":{"env":[{"name":"SALT","value":"2"}]}}}`)
		return h.c.Patch(ctx, inst, client.RawPatch("application/merge-patch+json", patch))
	}, gone)
	return err
}

func phaseDelete(ctx context.Context, h *harness, r *results) error {
	var err error
	r.Delete, err = h.measured(ctx, "delete", names("app", h.o.n), nil, func(n string) error {
		return h.c.Delete(ctx, &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: n}})
	}, nil)
	r.LeftAfterDelete = h.leftovers()
	return err
}

// leftovers counts what the node still holds under the agent's roots.
func (h *harness) leftovers() []string {
	var out []string
	for _, dir := range []string{filepath.Join("/sys/fs/cgroup/pids", h.lay.CgroupRoot), filepath.Join(h.lay.StateRoot, "instances", benchNS), filepath.Join(h.lay.RunRoot, benchNS)} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
