package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// phaseBatch is the latency of small applies on a settled agent (queues
// empty): one Instance alone (the guard), then the batch, each repeated
// for its rounds so a p99 pools more than one burst; every round is
// deleted, and gone, before the next. The batch's critical path is broken
// down by stage (timeline.go) and by the agent's and the API server's
// metrics (promdiff.go).
func phaseBatch(ctx context.Context, h *harness, r *results) error {
	if err := h.waitQueuesEmpty(ctx, 10*time.Second); err != nil {
		return err
	}
	var err error
	if r.Single, r.SingleStages, _, err = h.batchRounds(ctx, "single", 1, h.o.singleRounds); err != nil {
		return fmt.Errorf("single: %w", err)
	}
	h.serverProfile(ctx, "batch", 20)
	r.BatchCreate, r.BatchStages, r.BatchWhere, err = h.batchRounds(ctx, "batch", h.o.batch, h.o.batchRounds)
	r.BatchRounds = h.o.batchRounds
	if err != nil {
		return err
	}
	if err := h.waitQueuesEmpty(ctx, 2*time.Second); err != nil {
		return err
	}
	if r.SingleFloorP50, r.SingleFloorP99, err = h.batchFloor(ctx, "floors", 1, h.o.singleRounds); err != nil {
		return err
	}
	r.BatchFloorP50, r.BatchFloorP99, err = h.batchFloor(ctx, "floorb", h.o.batch, h.o.batchRounds)
	return err
}

// batchRounds applies size Instances at once, rounds times, and pools
// their apply→Ready latencies; the other figures are the last round's.
func (h *harness) batchRounds(ctx context.Context, prefix string, size, rounds int) (phase, []stageRow, where, error) {
	var pooled phase
	var lat []time.Duration
	began := map[string]time.Time{}
	var agentSum, serverSum, selfSum scrape
	var seats float64
	trace := ""
	if h.o.trace {
		trace = instanceName(prefix+"0", 0)
	}
	tl, stop := h.watchTimeline(ctx, trace)
	defer func() {
		stop()
		for _, l := range tl.lines {
			fmt.Println("bench: trace:", l)
		}
	}()
	for round := range max(rounds, 1) {
		if round > 0 {
			if err := h.waitQueuesEmpty(ctx, 2*time.Second); err != nil {
				return pooled, nil, where{}, err
			}
		}
		ns := names(fmt.Sprintf("%s%d", prefix, round), size)
		a0, _ := h.agentScrape()
		s0, _ := h.serverScrape(ctx)
		m0 := selfScrape()
		p, err := h.measured(ctx, prefix, ns, served(1), func(n string) error {
			return h.c.Create(ctx, benchInstance(n, "1", h.app))
		}, nil)
		if err != nil {
			return pooled, nil, where{}, err
		}
		a1, _ := h.agentScrape()
		s1, _ := h.serverScrape(ctx)
		agentSum, serverSum, selfSum = agentSum.plus(a1.minus(a0)), serverSum.plus(s1.minus(s0)), selfSum.plus(selfScrape().minus(m0))
		seats = s1.sum("apiserver_flowcontrol_nominal_limit_seats", map[string]string{"priority_level": agentLevel})
		lat = append(lat, p.lat...)
		for k, v := range p.began {
			began[k] = v
		}
		pooled = p
		if _, err := h.measured(ctx, prefix+"-delete", ns, nil, func(n string) error {
			return h.c.Delete(ctx, &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: n}})
		}, nil); err != nil {
			return pooled, nil, where{}, err
		}
	}
	pooled.P50, pooled.P90, pooled.P99 = testutil.Percentiles(lat)
	pooled.Reached, pooled.lat = len(lat), lat
	return pooled, tl.rows(began), explain(agentSum, serverSum, selfSum, seats, size*max(rounds, 1)), nil
}

// plus is s and d added series by series (s may be nil).
func (s scrape) plus(d scrape) scrape {
	out := scrape{}
	for k, v := range s {
		out[k] = v
	}
	for k, v := range d {
		if o, ok := out[k]; ok {
			v.value += o.value
		}
		out[k] = v
	}
	return out
}

// batchTable is the batch's breakdown, for the printed results.
func (r *results) batchTable() string {
	if len(r.BatchStages) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nbatch of %d, %d rounds: where apply→Ready goes (the bench's watch; each stage's first sight)\n", r.Batch, r.BatchRounds)
	fmt.Fprintf(&b, "the batch's API floor (user's create + the agent's 4 unavoidable writes in a row, raw client, no start): p50/p99 %.0f / %.0f ms\n",
		1000*r.BatchFloorP50, 1000*r.BatchFloorP99)
	c := r.BatchCreate
	fmt.Fprintf(&b, "the last round's CPU: API server+etcd %.2f s, agent %.2f s, its units (shims, trampolines, apps) %.2f s, the bench process (clients, watches, key minter) %.2f s; cores %.0f%% busy over %.2f s\n",
		c.ControlPlaneCPU, c.AgentCPU, c.UnitsCPU, c.BenchCPU, 100*c.MachineBusy, c.All)
	b.WriteString(stageTable(r.BatchStages))
	for _, l := range r.BatchWhere.Lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "one Instance alone, %d rounds; its API floor p50/max %.0f / %.0f ms:\n", r.Single.Reached, 1000*r.SingleFloorP50, 1000*r.SingleFloorP99)
	b.WriteString(stageTable(r.SingleStages))
	return b.String()
}

// batchFloor is the batch's API floor: size Instances at once, each the
// user's create and then the four writes a truthful agent cannot avoid
// (floorWrites["create"]) in a row, by a raw client with one goroutine per
// Instance, on the same API server (its key minter mints their keys
// too); per Instance, the create's start to the last write's answer,
// pooled over rounds. No start, no watch: what the API alone costs.
func (h *harness) batchFloor(ctx context.Context, prefix string, size, rounds int) (p50, p99 float64, err error) {
	fc, err := h.floorClient(ctx)
	if err != nil {
		return 0, 0, err
	}
	var lat []time.Duration
	for round := range max(rounds, 1) {
		ns := names(fmt.Sprintf("%s%d", prefix, round), size)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range ns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				e := fc.userCreate(ctx, n)
				if e == nil {
					e = fc.create(ctx, n)
				}
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, time.Since(t0))
				if e != nil && err == nil {
					err = fmt.Errorf("%s: %w", n, e)
				}
			}()
		}
		wg.Wait()
		if err != nil {
			return 0, 0, err
		}
		for _, n := range ns {
			if err := fc.userDelete(ctx, n); err != nil {
				return 0, 0, err
			}
			if err := fc.removeGeneration(ctx, n, 1); err != nil {
				return 0, 0, err
			}
			if err := fc.patch(ctx, fc.inst, n, map[string]any{"metadata": map[string]any{"finalizers": nil}}); err != nil {
				return 0, 0, err
			}
		}
	}
	p50, _, p99 = testutil.Percentiles(lat)
	return p50, p99, nil
}
