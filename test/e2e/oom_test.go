package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestUsageSeriesAndOOMKilled: on the real node (direct backend, this
// host's cgroups), a serving Instance's usage series on the agent's
// /metrics carry its tier's memory limit, a working set and CPU time;
// then a template that allocates far beyond its 64Mi tier is OOM-killed
// by the kernel, its Generation says OOMKilled with the limit, and the
// OOM events series counts the kill.
func TestUsageSeriesAndOOMKilled(t *testing.T) {
	a := startAgent(t, "e2e-oom", withMetrics)
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name, inst.Spec.Host = "hungry", "hungry.example.com"
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	waitServing(t, inst.Name, 1)

	series := map[string]string{"namespace": "default", "name": inst.Name}
	sample := func(name string) float64 {
		v, err := strconv.ParseFloat(agentSample(t, a.MetricsAddr, name, series), 64)
		if err != nil {
			return -1
		}
		return v
	}
	testutil.Eventually(t, "the usage series of the serving generation", 30*time.Second, pollEvery, func() (bool, string) {
		ws, cpu := sample("unitlet_instance_memory_working_set_bytes"), sample("unitlet_instance_cpu_usage_seconds_total")
		limit, oom := sample("unitlet_instance_spec_memory_limit_bytes"), sample("unitlet_instance_oom_events_total")
		return ws > 0 && cpu > 0 && limit == 64<<20 && oom == 0,
			fmt.Sprintf("working set %v, cpu %v, limit %v, oom %v", ws, cpu, limit, oom)
	})

	// 256 MiB of bytes actually written: the kernel kills it at 64Mi.
	updateInstance(t, inst.Name, func(i *v1.Instance) {
		i.Spec.Template.Args = []string{"-c", "b = b'x' * (256 << 20)"}
	})
	// Started keeps the exit's reason; Ready moves on to Retired once the
	// Instance replaces the generation.
	const said = "killed by SIGKILL (signal): the kernel OOM-killed 1 process in its cgroup at its memory limit of 64Mi"
	testutil.Eventually(t, "generation 2 reads OOMKilled", 60*time.Second, pollEvery, func() (bool, string) {
		if !generationExists(t, inst.Name, 2) {
			return false, "no generation 2 yet"
		}
		g2 := getGeneration(t, inst.Name, 2)
		c := meta.FindStatusCondition(g2.Status.Conditions, v1.ConditionStarted)
		return c != nil && c.Reason == v1.ReasonOOMKilled && strings.Contains(c.Message, said), conditions(g2.Status.Conditions)
	})
	testutil.Eventually(t, "the OOM kill counted on /metrics", 90*time.Second, pollEvery, func() (bool, string) {
		oom := sample("unitlet_instance_oom_events_total")
		return oom >= 1, fmt.Sprintf("oom events %v", oom)
	})
}
