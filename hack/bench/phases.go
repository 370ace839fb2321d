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
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
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
// nothing else of it still retiring (Reconciling gone).
func served(want int64) func(*v1.Instance) bool {
	return func(i *v1.Instance) bool {
		return i.Status.ActiveGeneration >= want && i.Status.ObservedGeneration == i.Generation &&
			meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady) &&
			meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReconciling) == nil
	}
}

// tracker watches the bench's Instances and records when each first met
// a condition (or was deleted: gone).
type tracker struct {
	mu   sync.Mutex
	met  map[string]time.Time
	want map[string]bool
	all  chan struct{}
}

// track starts watching before the phase acts, so nothing is missed;
// cond nil waits for deletion. A watch the API server ends (it does, under
// load) is started again after a list, which also counts what happened
// meanwhile.
func (h *harness) track(ctx context.Context, names []string, cond func(*v1.Instance) bool) (*tracker, func(), error) {
	tr := &tracker{met: map[string]time.Time{}, want: map[string]bool{}, all: make(chan struct{})}
	for _, n := range names {
		tr.want[n] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	rv, err := h.relist(ctx, tr, cond)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	go func() {
		for ctx.Err() == nil {
			h.follow(ctx, tr, cond, rv)
			sleep(ctx, 100*time.Millisecond)
			if next, err := h.relist(ctx, tr, cond); err == nil {
				rv = next
			}
		}
	}()
	return tr, cancel, nil
}

// relist counts what a list shows and returns its resource version.
func (h *harness) relist(ctx context.Context, tr *tracker, cond func(*v1.Instance) bool) (string, error) {
	var list v1.InstanceList
	if err := h.c.List(ctx, &list, client.InNamespace(benchNS)); err != nil {
		return "", err
	}
	now, present := time.Now(), map[string]bool{}
	for i := range list.Items {
		present[list.Items[i].Name] = true
		if cond != nil && cond(&list.Items[i]) {
			tr.hit(list.Items[i].Name, now)
		}
	}
	if cond == nil {
		for n := range tr.want {
			if !present[n] {
				tr.hit(n, now)
			}
		}
	}
	return list.ResourceVersion, nil
}

// follow counts watch events from rv until the watch ends.
func (h *harness) follow(ctx context.Context, tr *tracker, cond func(*v1.Instance) bool, rv string) {
	w, err := h.c.Watch(ctx, &v1.InstanceList{}, client.InNamespace(benchNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		inst, ok := ev.Object.(*v1.Instance)
		if !ok {
			return // an error event: list and watch again
		}
		if !tr.want[inst.Name] {
			continue
		}
		if (cond == nil && ev.Type == watch.Deleted) || (cond != nil && ev.Type != watch.Deleted && cond(inst)) {
			tr.hit(inst.Name, time.Now())
		}
	}
}

func (t *tracker) hit(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.met[name]; seen {
		return
	}
	t.met[name] = at
	if len(t.met) == len(t.want) {
		close(t.all)
	}
}

// wait returns when every name met the condition, or at the limit; it
// says how far it got every 30 s.
func (t *tracker) wait(ctx context.Context, limit time.Duration) error {
	t0 := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	end := time.After(limit)
	for {
		select {
		case <-t.all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			t.mu.Lock()
			fmt.Printf("bench:   %d of %d after %s\n", len(t.met), len(t.want), time.Since(t0).Round(time.Second))
			t.mu.Unlock()
		case <-end:
			t.mu.Lock()
			defer t.mu.Unlock()
			var missing []string
			for n := range t.want {
				if _, ok := t.met[n]; !ok && len(missing) < 5 {
					missing = append(missing, n)
				}
			}
			return fmt.Errorf("%d of %d reached within %s; not %v", len(t.met), len(t.want), limit, missing)
		}
	}
}

func (t *tracker) times() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.met))
	for k, v := range t.met {
		out[k] = v
	}
	return out
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

// measured runs act under a tracker for cond and fills a phase's figures.
func (h *harness) measured(ctx context.Context, name string, names []string, cond func(*v1.Instance) bool, act func(string) error) (phase, error) {
	var p phase
	tr, stop, err := h.track(ctx, names, cond)
	if err != nil {
		return p, err
	}
	defer stop()
	cpu0, _, _ := h.agentUsage()
	cp0, units0, self0 := controlPlaneCPU(), unitsCPU(h.lay.CgroupRoot), selfCPU()
	busy0, total0 := machineCPU()
	req0, _ := h.apiRequests()
	srv0, _ := h.apiserverRequests(ctx)
	h.profile(name, 20)
	t0 := time.Now()
	began, err := parallel(names, act)
	if err != nil {
		return p, err
	}
	werr := tr.wait(ctx, h.o.phaseLimit)
	p.All = time.Since(t0).Seconds()
	cpu1, rss, _ := h.agentUsage()
	busy1, total1 := machineCPU()
	p.ControlPlaneCPU = (controlPlaneCPU() - cp0).Seconds()
	p.UnitsCPU, p.BenchCPU = (unitsCPU(h.lay.CgroupRoot) - units0).Seconds(), (selfCPU() - self0).Seconds()
	if total1 > total0 {
		p.MachineBusy = (busy1 - busy0) / (total1 - total0)
	}
	req1, _ := h.apiRequests()
	srv1, _ := h.apiserverRequests(ctx)
	p.ServerRequests = perInstance(srv0, srv1, len(names))
	p.AgentCPU, p.AgentPeakRSS = (cpu1 - cpu0).Seconds(), rss
	p.APIRequestsPerInstance = (req1 - req0) / float64(len(names))
	var lat []time.Duration
	for n, at := range tr.times() {
		lat = append(lat, at.Sub(began[n]))
	}
	p.P50, p.P90, p.P99 = percentiles(lat)
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
	})
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
	r.Swap, err = h.measured(ctx, "swap", names("app", h.o.n), served(2), func(n string) error {
		inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: n}}
		patch := []byte(`{"spec":{"template":{"env":[{"name":"SALT","value":"2"}]}}}`)
		return h.c.Patch(ctx, inst, client.RawPatch("application/merge-patch+json", patch))
	})
	return err
}

func phaseDelete(ctx context.Context, h *harness, r *results) error {
	var err error
	r.Delete, err = h.measured(ctx, "delete", names("app", h.o.n), nil, func(n string) error {
		return h.c.Delete(ctx, &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: n}})
	})
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
