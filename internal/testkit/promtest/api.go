package promtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"
)

var client = &http.Client{Timeout: 10 * time.Second}

// API GETs path of the HTTP API and returns the data of a successful answer.
func (s *Server) API(path string, q url.Values) (json.RawMessage, error) {
	resp, err := client.Get(s.Base + path + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, body.Status, body.Error)
	}
	return body.Data, nil
}

// Query evaluates expr now and returns the labels of each resulting series.
func (s *Server) Query(t testing.TB, expr string) []map[string]string {
	t.Helper()
	data, err := s.API("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, m := range r.Result {
		out = append(out, m.Metric)
	}
	return out
}

// Firing lists "alertname namespace/name" of the alerts in state
// firing, as /api/v1/alerts reports them, sorted.
func (s *Server) Firing(t testing.TB) []string {
	t.Helper()
	data, err := s.API("/api/v1/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range r.Alerts {
		if a.State == "firing" {
			out = append(out, a.Labels["alertname"]+" "+a.Labels["namespace"]+"/"+a.Labels["name"])
		}
	}
	sort.Strings(out)
	return out
}

// LabelValues are the values of label over all series, or over those
// matching the selector match when it is not empty.
func (s *Server) LabelValues(t testing.TB, label, match string) []string {
	t.Helper()
	q := url.Values{}
	if match != "" {
		q.Set("match[]", match)
	}
	data, err := s.API("/api/v1/label/"+label+"/values", q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Missing are the names in want that Prometheus holds no series of.
func (s *Server) Missing(t testing.TB, want []string) []string {
	t.Helper()
	scraped := map[string]bool{}
	for _, n := range s.LabelValues(t, "__name__", "") {
		scraped[n] = true
	}
	var out []string
	for _, n := range want {
		if !scraped[n] {
			out = append(out, n)
		}
	}
	return out
}
