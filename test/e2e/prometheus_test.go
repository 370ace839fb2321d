package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/cgrouphold"
	"github.com/unitlet/unitlet/internal/testkit/promtest"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// withMetrics makes the agent serve /metrics on a free loopback port.
func withMetrics(a *agent) { a.Metrics = true }

// TestPrometheusFiresOnUnprovenKill: a real Prometheus scrapes a running
// agent with rules.yaml loaded (for: cut to 0s). A Replace swap meets a
// process the agent cannot kill in the old generation's cgroup: the kill
// stays unproven past the agent's proof budget, the Instance says
// KillUnproven, the agent's /metrics says so and UnitletKillUnproven fires
// in Prometheus' API. Released, the kill is proven, the alert resolves and
// the swap completes, and the condition's series is gone (absent means
// normal: a serving Instance has none). Suspended, the Instance has its
// unitlet_instance_suspended series. Every metric the dashboard and the
// rules name was scraped from the agent, what it serves passes promtool
// check metrics, and a deleted Instance leaves no series.
func TestPrometheusFiresOnUnprovenKill(t *testing.T) {
	root := testenv.RepoRoot()
	rulesFile := filepath.Join(root, "config", "prometheus", "rules.yaml")
	dashboardFile := filepath.Join(root, "config", "grafana", "unitlet-agent.json")
	bin := promtest.Binary(t, "prometheus")
	a := startAgent(t, "e2e-prom", withMetrics)
	prom := promtest.Start(t, promtest.Config{Bin: bin, Target: a.MetricsAddr, RulesFile: rulesFile, Node: a.Node})

	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name = "ledger-alert"
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) }) // runs after the hold ends
	waitServing(t, inst.Name, 1)
	// Serving and proven: its usage is scraped and none of its conditions
	// has a series.
	promtest.WaitFor(t, 60*time.Second, "the agent scraped with nothing firing", func() (bool, string) {
		up := prom.Query(t, `up{job="unitlet-agent"} == 1 and on() count(unitlet_instance_memory_working_set_bytes{name="ledger-alert"}) > 0`+
			` and on() absent(unitlet_instance_condition{name="ledger-alert"})`)
		firing := prom.Firing(t)
		return len(up) == 1 && len(firing) == 0, fmt.Sprintf("up: %v, firing: %v", up, firing)
	})

	// The fault: a process the agent cannot kill in generation 1's cgroup.
	lay := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}
	li, err := lay.Instance("default", inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	child, err := layout.GenerationCgroup(1)
	if err != nil {
		t.Fatal(err)
	}
	g1Cgroup := path.Join(li.Cgroup(), child)
	if got := strings.TrimPrefix(getGeneration(t, inst.Name, 1).Status.Cgroup, "/"); got != g1Cgroup {
		t.Fatalf("generation 1 reports cgroup %q, layout says %q", got, g1Cgroup)
	}
	held := cgrouphold.In(t, g1Cgroup, runID)

	retired := time.Now()
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	testutil.Eventually(t, "Instance KillUnproven=True", 120*time.Second, pollEvery, func() (bool, string) {
		i := getInstance(t, inst.Name)
		return meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionKillUnproven), conditions(i.Status.Conditions)
	})
	unproven := time.Since(retired)
	// The agent sets its series just after its status write returns, so
	// a scrape can come between the two: it is waited for (the hold keeps
	// the kill unproven meanwhile).
	want := map[string]string{"namespace": "default", "name": inst.Name, "type": v1.ConditionKillUnproven, "status": "True"}
	testutil.Eventually(t, "the agent's KillUnproven series", 10*time.Second, pollEvery, func() (bool, string) {
		got := agentSample(t, a.MetricsAddr, "unitlet_instance_condition", want)
		return got == "1", fmt.Sprintf("unitlet_instance_condition%v = %q, want 1", want, got)
	})
	alert := "UnitletKillUnproven default/" + inst.Name
	var firing []string
	promtest.WaitFor(t, 60*time.Second, alert+" firing", func() (bool, string) {
		firing = prom.Firing(t)
		return slices.Contains(firing, alert), fmt.Sprint(firing)
	})
	fired := time.Since(retired)
	// Replace: nothing new starts while the old generation may still run.
	if g2 := lookupGeneration(t, inst.Name, 2); g2 != nil && g2.Status.StartedAt != nil {
		t.Errorf("generation 2 started at %v while generation 1's kill was unproven", g2.Status.StartedAt)
	}

	// The fault ends: the agent's next look proves the kill.
	held.Release(t)
	released := time.Now()
	waitServing(t, inst.Name, 2)
	testutil.Eventually(t, "KillUnproven=False", 60*time.Second, pollEvery, func() (bool, string) {
		i := getInstance(t, inst.Name)
		return meta.IsStatusConditionFalse(i.Status.Conditions, v1.ConditionKillUnproven), conditions(i.Status.Conditions)
	})
	promtest.WaitFor(t, 60*time.Second, alert+" resolved", func() (bool, string) {
		f := prom.Firing(t)
		return !slices.Contains(f, alert), fmt.Sprint(f)
	})
	kill := map[string]string{"name": inst.Name, "type": v1.ConditionKillUnproven}
	testutil.Eventually(t, "KillUnproven's series gone from /metrics", 30*time.Second, pollEvery, func() (bool, string) {
		v := agentSample(t, a.MetricsAddr, "unitlet_instance_condition", kill)
		return v == "", "still " + v
	})
	fmt.Printf("e2e prometheus: KillUnproven=True %s after the swap began, %s firing %s after, resolved %s after release; firing then: %v\n",
		unproven.Round(time.Millisecond), alert, fired.Round(time.Millisecond), time.Since(released).Round(time.Millisecond), firing)

	// Suspended: the one state unitlet_instance_suspended has a series in.
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Suspend = true })
	promtest.WaitFor(t, 60*time.Second, "the suspended Instance scraped", func() (bool, string) {
		got := prom.Query(t, `unitlet_instance_suspended{name="ledger-alert"} == 1`)
		return len(got) == 1, fmt.Sprint(got)
	})

	// What the dashboard and the rules read, the agent exported.
	for _, n := range prom.Missing(t, promtest.MetricNames(t, rulesFile, dashboardFile)) {
		t.Errorf("%s is named by the dashboard or the rules but was not scraped from the agent", n)
	}
	if nodes := prom.LabelValues(t, "node", "unitlet_agent_info"); !slices.Equal(nodes, []string{a.Node}) {
		t.Errorf("unitlet_agent_info nodes: %v, want [%s]", nodes, a.Node)
	}
	// Its names, types and HELP pass Prometheus' own linter.
	promtest.CheckMetrics(t, promtest.Binary(t, "promtool"), a.MetricsAddr)

	// Deleted, the Instance leaves no cgroup and no series.
	deleteAndWait(t, inst.Name)
	for _, h := range []string{"memory", "pids", "freezer", "unified"} {
		if _, err := os.Stat(filepath.Join(cgrouphold.CgroupMount, h, li.Cgroup())); !os.IsNotExist(err) {
			t.Errorf("after delete %s/%s still exists (%v)", h, li.Cgroup(), err)
		}
	}
	testutil.Eventually(t, "the Instance's series gone from /metrics", 30*time.Second, pollEvery, func() (bool, string) {
		v := agentSample(t, a.MetricsAddr, "unitlet_instance_condition", map[string]string{"name": inst.Name})
		return v == "", "still " + v
	})
}

func lookupGeneration(t *testing.T, inst string, n int64) *v1.Generation {
	t.Helper()
	g := &v1.Generation{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-g%d", inst, n)}, g)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// agentSample reads the agent's /metrics and returns the value of the
// first sample of name whose labels include match, or "" if none has.
func agentSample(t *testing.T, addr, name string, match map[string]string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		if matches(labels, match) {
			return m[3]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}
