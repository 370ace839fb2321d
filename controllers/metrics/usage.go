package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Per-Instance usage, read from the Instance's generations' cgroups on
// each scrape (cAdvisor's names with the unitlet_instance_ prefix).
const (
	NameInstanceMemoryWorkingSet = "unitlet_instance_memory_working_set_bytes"
	NameInstanceCPUUsage         = "unitlet_instance_cpu_usage_seconds_total"
	NameInstanceOOMEvents        = "unitlet_instance_oom_events_total"
	NameInstanceMemoryLimit      = "unitlet_instance_spec_memory_limit_bytes"
)

// Usage is one Instance's usage on this node now, summed over its
// generations here.
type Usage struct {
	Namespace, Name       string
	MemoryWorkingSetBytes float64
	CPUUsageSeconds       float64
	OOMEvents             float64
	// MemoryLimitBytes is the tier's memory limit; HasMemoryLimit false
	// (no limit, or no memory controller) leaves its series out.
	MemoryLimitBytes float64
	HasMemoryLimit   bool
}

// UsageSource lists the usage of every Instance the agent runs. It is
// called on every scrape: it must read what the agent already holds
// (cgroup files), never ask the API server.
type UsageSource func() []Usage

// usageCollector turns a UsageSource into series at scrape time: no
// series to keep or delete, so an Instance gone is gone from the next
// scrape.
type usageCollector struct {
	src atomic.Pointer[UsageSource]

	memory, cpu, oom, limit *prometheus.Desc
}

func newUsageCollector() *usageCollector {
	labels := []string{"namespace", "name"}
	return &usageCollector{
		memory: prometheus.NewDesc(NameInstanceMemoryWorkingSet,
			"Memory an Instance's generations on this node use, less inactive file pages (the figure the OOM killer follows).", labels, nil),
		cpu: prometheus.NewDesc(NameInstanceCPUUsage,
			"CPU time used by an Instance's generations on this node, summed over them; it drops (a counter reset) when a generation's cgroup goes.", labels, nil),
		oom: prometheus.NewDesc(NameInstanceOOMEvents,
			"Processes the kernel OOM-killed in an Instance's generations' cgroups on this node; it drops (a counter reset) when a generation's cgroup goes.", labels, nil),
		limit: prometheus.NewDesc(NameInstanceMemoryLimit,
			"The memory limit of an Instance's generations (its tier's); absent when none is set.", labels, nil),
	}
}

// setSource makes the collector read src; nil reads nothing.
func (c *usageCollector) setSource(src UsageSource) {
	if src == nil {
		c.src.Store(nil)
		return
	}
	c.src.Store(&src)
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.memory
	ch <- c.cpu
	ch <- c.oom
	ch <- c.limit
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	for _, u := range (*src)() {
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, u.MemoryWorkingSetBytes, u.Namespace, u.Name)
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, u.CPUUsageSeconds, u.Namespace, u.Name)
		ch <- prometheus.MustNewConstMetric(c.oom, prometheus.CounterValue, u.OOMEvents, u.Namespace, u.Name)
		if u.HasMemoryLimit {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, u.MemoryLimitBytes, u.Namespace, u.Name)
		}
	}
}

// stdUsage is registered on controller-runtime's registry at init, with
// no source until the agent hosts.
var stdUsage = mustUsage()

func mustUsage() *usageCollector {
	c := newUsageCollector()
	if err := crmetrics.Registry.Register(c); err != nil {
		panic("unitlet metrics: " + err.Error())
	}
	return c
}

// SetUsageSource makes the usage series read src on every scrape (nil:
// none). The agent sets it once it hosts.
func SetUsageSource(src UsageSource) { stdUsage.setSource(src) }
