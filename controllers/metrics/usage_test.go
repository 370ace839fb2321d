package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestUsageCollector: the series are read from the source on each scrape,
// with {namespace,name} labels; an Instance with no limit has no limit
// series, and one gone from the source is gone from the next scrape.
func TestUsageCollector(t *testing.T) {
	usage := []Usage{
		{Namespace: "shop", Name: "web", MemoryWorkingSetBytes: 1 << 20, CPUUsageSeconds: 2.5, OOMEvents: 1, MemoryLimitBytes: 16 << 20, HasMemoryLimit: true},
		{Namespace: "blog", Name: "web", MemoryWorkingSetBytes: 4096, CPUUsageSeconds: 0.25},
	}
	scrapes := 0
	c := newUsageCollector()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	names := []string{NameInstanceMemoryWorkingSet, NameInstanceCPUUsage, NameInstanceOOMEvents, NameInstanceMemoryLimit}
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("series with no source = %d, %v; want none", n, err)
	}
	c.setSource(func() []Usage { scrapes++; return usage })

	want := `
# HELP unitlet_instance_cpu_usage_seconds_total CPU time used by an Instance's generations on this node, summed over them; it drops (a counter reset) when a generation's cgroup goes.
# TYPE unitlet_instance_cpu_usage_seconds_total counter
unitlet_instance_cpu_usage_seconds_total{name="web",namespace="blog"} 0.25
unitlet_instance_cpu_usage_seconds_total{name="web",namespace="shop"} 2.5
# HELP unitlet_instance_memory_working_set_bytes Memory an Instance's generations on this node use, less inactive file pages (the figure the OOM killer follows).
# TYPE unitlet_instance_memory_working_set_bytes gauge
unitlet_instance_memory_working_set_bytes{name="web",namespace="blog"} 4096
unitlet_instance_memory_working_set_bytes{name="web",namespace="shop"} 1.048576e+06
# HELP unitlet_instance_oom_events_total Processes the kernel OOM-killed in an Instance's generations' cgroups on this node; it drops (a counter reset) when a generation's cgroup goes.
# TYPE unitlet_instance_oom_events_total counter
unitlet_instance_oom_events_total{name="web",namespace="blog"} 0
unitlet_instance_oom_events_total{name="web",namespace="shop"} 1
# HELP unitlet_instance_spec_memory_limit_bytes The memory limit of an Instance's generations (its tier's); absent when none is set.
# TYPE unitlet_instance_spec_memory_limit_bytes gauge
unitlet_instance_spec_memory_limit_bytes{name="web",namespace="shop"} 1.6777216e+07
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if scrapes != 1 {
		t.Errorf("source read %d times for one scrape, want 1", scrapes)
	}

	usage = usage[1:]
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 3 {
		t.Errorf("series after shop/web went = %d, %v; want blog/web's 3", n, err)
	}
}
