package agent

import (
	"context"
	"time"

	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/node"
)

// usageReadBudget bounds one scrape's read of the generations' cgroups.
const usageReadBudget = 5 * time.Second

// usageSource serves the usage series from the generations rt holds:
// cgroup files only, no API call, whatever the number of Instances.
func usageSource(rt interface {
	Usage(context.Context) []node.InstanceUsage
}) metrics.UsageSource {
	return func() []metrics.Usage {
		ctx, cancel := context.WithTimeout(context.Background(), usageReadBudget)
		defer cancel()
		return usageSeries(rt.Usage(ctx))
	}
}

// usageSeries turns the runtime's usage into the series' values.
func usageSeries(in []node.InstanceUsage) []metrics.Usage {
	out := make([]metrics.Usage, 0, len(in))
	for _, u := range in {
		m := metrics.Usage{
			Namespace: u.Namespace, Name: u.Name,
			MemoryWorkingSetBytes: float64(u.MemoryWorkingSetBytes),
			CPUUsageSeconds:       float64(u.CPUUsageNanos) / 1e9,
			OOMEvents:             float64(u.OOMKills),
		}
		if u.MemoryLimitBytes != cgroups.Unlimited && u.MemoryLimitBytes != cgroups.Absent {
			m.MemoryLimitBytes, m.HasMemoryLimit = float64(u.MemoryLimitBytes), true
		}
		out = append(out, m)
	}
	return out
}
