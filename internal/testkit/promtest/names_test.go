package promtest

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	tests := map[string]struct {
		rules, dashboard string
		want             []string
	}{
		"rules then dashboard, each once": {
			rules: `groups:
  - name: g
    rules:
      - alert: A
        expr: unitlet_a{x="1"} == 1 unless on (n) unitlet_b == 1
      - alert: B
        expr: up{job="unitlet-agent"} == 0
`,
			dashboard: `{"panels":[{"targets":[{"expr":"sum(rate(unitlet_c_bucket[5m]))"},{"expr":"unitlet_a * on(node) unitlet_d"}]},{"targets":[{"expr":"unitlet_e"}]}]}`,
			want:      []string{"unitlet_c_bucket", "unitlet_a", "unitlet_d", "unitlet_e", "unitlet_b", "up"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rules, dash := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "dash.json")
			write(t, rules, tc.rules)
			write(t, dash, tc.dashboard)
			if diff := cmp.Diff(tc.want, MetricNames(t, rules, dash)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The committed rules and dashboard name enough metrics to check.
func TestMetricNamesOfTheRepo(t *testing.T) {
	root := filepath.Join("..", "..", "..", "config")
	names := MetricNames(t, filepath.Join(root, "prometheus", "rules.yaml"), filepath.Join(root, "grafana", "unitlet-agent.json"))
	for _, n := range []string{"unitlet_instance_condition", "up"} {
		if !contains(names, n) {
			t.Errorf("%s missing from %v", n, names)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
