package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/node"
)

func TestUsageSeries(t *testing.T) {
	tests := map[string]struct {
		in   node.InstanceUsage
		want metrics.Usage
	}{
		"a limit": {
			in: node.InstanceUsage{InstanceRef: node.InstanceRef{Namespace: "ns", Name: "a"},
				Stats: cgroups.Stats{MemoryWorkingSetBytes: 10, CPUUsageNanos: 1500000000, OOMKills: 2, MemoryLimitBytes: 64 << 20}},
			want: metrics.Usage{Namespace: "ns", Name: "a", MemoryWorkingSetBytes: 10, CPUUsageSeconds: 1.5, OOMEvents: 2,
				MemoryLimitBytes: 64 << 20, HasMemoryLimit: true},
		},
		"no limit": {
			in:   node.InstanceUsage{InstanceRef: node.InstanceRef{Namespace: "ns", Name: "b"}, Stats: cgroups.Stats{MemoryLimitBytes: cgroups.Unlimited}},
			want: metrics.Usage{Namespace: "ns", Name: "b"},
		},
		"no memory controller": {
			in:   node.InstanceUsage{InstanceRef: node.InstanceRef{Namespace: "ns", Name: "c"}, Stats: cgroups.Stats{CPUUsageNanos: 1, MemoryLimitBytes: cgroups.Absent}},
			want: metrics.Usage{Namespace: "ns", Name: "c", CPUUsageSeconds: 1e-9},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff([]metrics.Usage{tc.want}, usageSeries([]node.InstanceUsage{tc.in})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
