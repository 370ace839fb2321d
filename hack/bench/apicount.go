package main

import (
	"context"
	"fmt"
	"sort"
)

// requestCounts is the API server's own count of requests by "VERB
// resource[/subresource]" (apiserver_request_total): it says which calls
// a phase's requests were, which the agent's client metric cannot.
type requestCounts map[string]float64

// apiserverRequests is the API server's apiserver_request_total, read
// from its /metrics (serverScrape), summed by "VERB resource[/sub]".
func (h *harness) apiserverRequests(ctx context.Context) (requestCounts, error) {
	sc, err := h.serverScrape(ctx)
	if err != nil {
		return nil, err
	}
	return requestsOf(sc), nil
}

// requestsOf sums a scrape's apiserver_request_total by call.
func requestsOf(sc scrape) requestCounts {
	out := requestCounts{}
	for _, s := range sc {
		if s.name != "apiserver_request_total" || s.labels["resource"] == "" {
			continue // /healthz, /metrics and the like
		}
		key := s.labels["verb"] + " " + s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += s.value
	}
	return out
}

// perInstance is after minus before, divided by n, largest first; rows
// under 0.05 per Instance are dropped.
func perInstance(before, after requestCounts, n int) []string {
	type row struct {
		k string
		v float64
	}
	var rows []row
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d >= 0.05 {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%.2f %s", r.v, r.k)
	}
	return out
}
