package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Where a batch's time goes inside the agent and the API server: the
// difference of their Prometheus metrics over the batch (queues, retries,
// reconciles by result, client round trips, the priority level's queue).

// labelRE takes a series' labels apart.
var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is every series of a metrics page, keyed by its line's series.
type scrape map[string]sample

func parseScrape(r io.Reader) (scrape, error) {
	out := scrape{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		series := line[:sp]
		s := sample{name: series, labels: map[string]string{}, value: v}
		if i := strings.IndexByte(series, '{'); i >= 0 {
			s.name = series[:i]
			for _, m := range labelRE.FindAllStringSubmatch(series[i:], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out[series] = s
	}
	return out, sc.Err()
}

// agentScrape reads the agent's /metrics.
func (h *harness) agentScrape() (scrape, error) {
	resp, err := http.Get("http://" + h.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseScrape(resp.Body)
}

// serverScrape reads the API server's /metrics as an administrator.
func (h *harness) serverScrape(ctx context.Context) (scrape, error) {
	hc, err := rest.HTTPClientFor(h.env.Config)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(h.env.Config.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseScrape(resp.Body)
}

// selfScrape reads this process's client metrics (controller-runtime's
// registry): the key minter's requests, the bench's own and the floor's;
// only the minter's ever conflict.
func selfScrape() scrape {
	out := scrape{}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			s := sample{name: mf.GetName(), labels: map[string]string{}, value: m.GetCounter().GetValue()}
			key := s.name
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			out[key] = s
		}
	}
	return out
}

// minus is s after minus before, series by series.
func (s scrape) minus(before scrape) scrape {
	out := scrape{}
	for k, v := range s {
		v.value -= before[k].value
		out[k] = v
	}
	return out
}

// sum adds the series of name whose labels include match.
func (s scrape) sum(name string, match map[string]string) float64 {
	var t float64
	for _, v := range s {
		if v.name == name && matches(v.labels, match) {
			t += v.value
		}
	}
	return t
}

// by sums name's series whose labels include match, grouped by label.
func (s scrape) by(name, label string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, v := range s {
		if v.name == name && matches(v.labels, match) {
			out[v.labels[label]] += v.value
		}
	}
	return out
}

// quantile is q of histogram name over the series matching match: the
// upper bound of the bucket it falls in (an estimate no finer than the
// buckets), +Inf past the last.
func (s scrape) quantile(name string, q float64, match map[string]string) float64 {
	buckets := map[float64]float64{}
	for _, v := range s {
		if v.name != name+"_bucket" || !matches(v.labels, match) {
			continue
		}
		le, err := strconv.ParseFloat(v.labels["le"], 64)
		if err == nil {
			buckets[le] += v.value
		}
	}
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return 0
	}
	want := q * buckets[les[len(les)-1]]
	for _, le := range les {
		if buckets[le] >= want {
			return le
		}
	}
	return math.Inf(1)
}

// mean is a histogram's or summary's sum over its count.
func (s scrape) mean(name string, match map[string]string) float64 {
	if n := s.sum(name+"_count", match); n > 0 {
		return s.sum(name+"_sum", match) / n
	}
	return 0
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// where is one batch's breakdown inside the agent and the API server.
type where struct {
	Lines []string `json:"lines"`
}

// explain renders what the agent's and the API server's metrics say of
// one batch of n: agent and server are their differences over it, seats
// the priority level's seats at its end (a gauge).
func explain(agent, server, self scrape, seats float64, n int) where {
	var w where
	add := func(format string, args ...any) { w.Lines = append(w.Lines, fmt.Sprintf(format, args...)) }
	for _, c := range []string{"instance", "generation"} {
		m := map[string]string{"name": c}
		add("%s queue: %.1f adds, %.1f retries per Instance; wait mean %.1f ms, p99 ≤ %.0f ms; reconcile mean %.1f ms, p99 ≤ %.0f ms",
			c, agent.sum("workqueue_adds_total", m)/float64(n), agent.sum("workqueue_retries_total", m)/float64(n),
			1000*agent.mean("workqueue_queue_duration_seconds", m), 1000*agent.quantile("workqueue_queue_duration_seconds", 0.99, m),
			1000*agent.mean("workqueue_work_duration_seconds", m), 1000*agent.quantile("workqueue_work_duration_seconds", 0.99, m))
		res := agent.by("controller_runtime_reconcile_total", "result", map[string]string{"controller": c})
		add("%s reconciles per Instance by result: %s", c, perN(res, n))
	}
	add("agent's API calls per Instance by verb: %s", perN(agent.by("rest_client_requests_total", "method", nil), n))
	add("agent's start (prepare + hand-off): mean %.1f ms, p99 ≤ %.0f ms",
		1000*agent.mean("unitlet_start_duration_seconds", nil), 1000*agent.quantile("unitlet_start_duration_seconds", 0.99, nil))
	lvl := map[string]string{"priority_level": agentLevel}
	add("API server, level %s: %.0f seats; queue wait mean %.1f ms, p99 ≤ %.0f ms; %.0f rejected",
		agentLevel, seats,
		1000*server.mean("apiserver_flowcontrol_request_wait_duration_seconds", lvl),
		1000*server.quantile("apiserver_flowcontrol_request_wait_duration_seconds", 0.99, lvl),
		server.sum("apiserver_flowcontrol_rejected_requests_total", lvl))
	conflicts := map[string]float64{}
	for _, v := range server {
		if v.name == "apiserver_request_total" && v.labels["code"] == "409" {
			k := v.labels["verb"] + " " + v.labels["resource"]
			if v.labels["subresource"] != "" {
				k += "/" + v.labels["subresource"]
			}
			conflicts[k] += v.value
		}
	}
	add("API server 409 (conflict or exists) per Instance: %s", perN(conflicts, n))
	for _, code := range []string{"409", "422"} {
		m := map[string]string{"code": code}
		add("%s per Instance by client: agent %s; key minter %s", code,
			perN(agent.by("rest_client_requests_total", "method", m), n), perN(self.by("rest_client_requests_total", "method", m), n))
	}
	for _, verb := range []string{"POST", "PUT", "PATCH", "GET", "LIST"} {
		m := map[string]string{"verb": verb}
		if calls := server.sum("apiserver_request_duration_seconds_count", m); calls > 0 {
			add("API server %s: %.2f per Instance, mean %.1f ms (every client)", verb, calls/float64(n),
				1000*server.mean("apiserver_request_duration_seconds", m))
		}
	}
	return w
}

func perN(m map[string]float64, n int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, m[k]/float64(n))
	}
	return strings.Join(parts, ", ")
}
