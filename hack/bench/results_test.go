package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCPUTable(t *testing.T) {
	used := phase{BusyCPU: 100, MachineBusy: 0.99, ControlPlaneCPU: 40, AgentCPU: 20, UnitsCPU: 10, BenchCPU: 5}
	tests := map[string]struct {
		r    results
		want []string // the table's rows after its header
	}{
		"other is what no named party used": {
			r:    results{Create: used},
			want: []string{"| create | 100.0 (99%) | 40.0 | 20.0 | 10.0 | 5.0 | 25.0 |"},
		},
		"the reboot between the swap and the delete; a phase not run is left out": {
			r: results{Create: used, Delete: used, Reboot: &rebootFigures{Reported: phase{BusyCPU: 10, MachineBusy: 0.5, AgentCPU: 2}}},
			want: []string{
				"| create | 100.0 (99%) | 40.0 | 20.0 | 10.0 | 5.0 | 25.0 |",
				"| reboot (to reported) | 10.0 (50%) | 0.0 | 2.0 | 0.0 | 0.0 | 8.0 |",
				"| delete | 100.0 (99%) | 40.0 | 20.0 | 10.0 | 5.0 | 25.0 |",
			},
		},
		"never below zero when the counters overlap": {
			r:    results{Swap: phase{BusyCPU: 1, AgentCPU: 2}},
			want: []string{"| overlap swap | 1.0 (0%) | 0.0 | 2.0 | 0.0 | 0.0 | 0.0 |"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSpace(tc.r.cpuTable()), "\n")
			if len(lines) < 4 {
				t.Fatalf("no table: %q", lines)
			}
			if diff := cmp.Diff(tc.want, lines[4:]); diff != "" {
				t.Errorf("rows (-want,+got):\n%s", diff)
			}
		})
	}
}
