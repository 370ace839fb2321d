package promtest

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

var metricName = regexp.MustCompile(`\bunitlet_[a-z_]+\b|\bup\b`)

// MetricNames are the metrics the rules' and the dashboard's expressions
// name, each once, in order of first use. Fewer than five means a file
// changed shape and the caller would check nothing.
func MetricNames(t testing.TB, rulesFile, dashboardFile string) []string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	exprs := DashboardExprs(t, dashboardFile)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("found only %v in %s and %s", out, rulesFile, dashboardFile)
	}
	return out
}

// DashboardExprs are the expr of every panel target in a Grafana dashboard.
func DashboardExprs(t testing.TB, dashboardFile string) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}
