package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// requestCounts is the API server's own count of requests by "VERB
// resource[/subresource]" (apiserver_request_total): it says which calls
// a phase's requests were, which the agent's client metric cannot.
type requestCounts map[string]float64

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiserverRequests reads the API server's /metrics as an administrator.
func (h *harness) apiserverRequests(ctx context.Context) (requestCounts, error) {
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
	out := requestCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		l := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			l[m[1]] = m[2]
		}
		if l["resource"] == "" {
			continue // /healthz, /metrics and the like
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err == nil {
			out[key] += v
		}
	}
	return out, sc.Err()
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
