package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// The committed JSON is what the code builds: `make verify` and this test
// fail alike when someone edits one without the other.
func TestCommittedDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(File)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run `go generate ./config/grafana` (-generated,+committed):\n%s", File, diff)
	}
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func TestDashboardShowsWhatOperatorsAsk(t *testing.T) {
	out, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	exprs := map[string]string{} // panel title -> its queries, joined
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q has id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs[p.Title] += tg.Expr + "\n"
		}
	}
	// Each topic the issue names has a panel querying its metric.
	tests := map[string]struct{ title, metric string }{
		"nodes":                  {"Agents by mode", "unitlet_agent_mode"},
		"instances by condition": {"Instances by condition", "unitlet_instance_condition"},
		"instances not ready":    {"Instances not Ready", `unitlet_instance_condition{type="Ready"`},
		"starts by outcome":      {"Starts by outcome", "unitlet_starts_total"},
		"unproven kills":         {"Unproven kills by reason", `unitlet_kills_total{proof="Unproven"`},
		"swap latency":           {"Swap duration (p95)", "unitlet_swap_duration_seconds_bucket"},
		"start latency":          {"Start latency", "unitlet_start_duration_seconds_bucket"},
		"memory vs limit":        {"Memory working set", "unitlet_instance_memory_working_set_bytes{"},
		"memory limit":           {"Memory working set", "unitlet_instance_spec_memory_limit_bytes{"},
		"memory of the limit":    {"Memory working set of the limit", "unitlet_instance_memory_working_set_bytes{"},
		"cpu":                    {"CPU", "rate(unitlet_instance_cpu_usage_seconds_total{"},
		"oom kills":              {"OOM kills", "increase(unitlet_instance_oom_events_total{"},
		"drain duration":         {"Drain duration (p95)", "unitlet_drain_duration_seconds_bucket"},
		"wake duration":          {"Wake latency", "unitlet_wake_duration_seconds_bucket"},
		"runs":                   {"Runs by result", "unitlet_run_duration_seconds_count"},
		"run duration":           {"Run duration (p95)", "unitlet_run_duration_seconds_bucket"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e, ok := exprs[tc.title]
			if !ok {
				t.Fatalf("no panel %q", tc.title)
			}
			if !strings.Contains(e, tc.metric) {
				t.Errorf("panel %q does not query %s:\n%s", tc.title, tc.metric, e)
			}
		})
	}
}

// unitlet_instance_condition has a series only while a condition is away
// from its normal status, valued 1: a query that looks for a 0 or for a
// normal status finds nothing.
func TestConditionQueriesReadAbsentAsNormal(t *testing.T) {
	out, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	var normal []string
	for _, typ := range v1.InstanceConditionTypes() {
		status, _ := v1.InstanceConditionNormal(typ)
		normal = append(normal, fmt.Sprintf("type=%q,status=%q", typ, status))
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "unitlet_instance_condition") {
				continue
			}
			if strings.Contains(tg.Expr, "== 0") || strings.Contains(tg.Expr, "== bool 0") {
				t.Errorf("panel %q compares a condition with 0, which it never is: %s", p.Title, tg.Expr)
			}
			for _, n := range normal {
				if strings.Contains(tg.Expr, n) {
					t.Errorf("panel %q selects a normal status (%s), which has no series: %s", p.Title, n, tg.Expr)
				}
			}
		}
	}
}
