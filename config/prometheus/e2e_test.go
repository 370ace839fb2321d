package prometheus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/testkit/promtest"
)

// A real Prometheus scrapes controller-runtime's registry, where
// controllers/metrics lives, with rules.yaml loaded (for: cut to 0s). A
// suspended Instance fires nothing, an injected KillUnproven reaches
// firing in Prometheus' own API and resolves once the Instance is back
// to normal (its series gone), every metric the dashboard and the rules
// name was scraped, and promtool check metrics finds nothing to say of
// what was served.
func TestEndToEndAlertFiresInPrometheus(t *testing.T) {
	bin := tool(t, "prometheus")

	// The agent side: the registry the manager serves, on loopback.
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	metrics.SetAgentInfo("e2e-node", "e2e", "direct")
	metrics.SetMode(metrics.ModeHosting)
	metrics.SetGenerationPhases(map[string]int{"Running": 1, "Retiring": 1})
	metrics.ObserveStart("Running", 40*time.Millisecond)
	metrics.ObserveKill(true, "", 20*time.Millisecond)
	metrics.ObserveKill(false, "CgroupNotEmpty", 10*time.Second)
	metrics.ObservePrepareStep("dirs", time.Millisecond)
	metrics.ObserveSwap("Overlap", "Succeeded", 2*time.Second)
	settled := []metav1.Condition{
		cond("Ready", "True", "Reconciled"), cond("KillUnproven", "False", "Proven"), cond("StartUncertain", "False", "Certain"),
	}
	metrics.SetInstanceConditions("shop", "web", settled)
	t.Cleanup(func() { metrics.DeleteInstance("shop", "web") })
	// Being suspended: not Ready, and left out of the alerts.
	metrics.SetInstanceConditions("shop", "cache", []metav1.Condition{
		cond("Ready", "False", "Suspended"), cond("Reconciling", "True", "Suspended"),
		cond("KillUnproven", "False", "Proven"), cond("StartUncertain", "False", "Certain"),
	})
	t.Cleanup(func() { metrics.DeleteInstance("shop", "cache") })
	// The usage an agent reads from the Instance's cgroups on scrape (real
	// cgroups: test/e2e TestUsageSeriesAndOOMKilled).
	metrics.SetUsageSource(func() []metrics.Usage {
		return []metrics.Usage{{Namespace: "shop", Name: "web", MemoryWorkingSetBytes: 12 << 20, CPUUsageSeconds: 1.5,
			OOMEvents: 1, MemoryLimitBytes: 64 << 20, HasMemoryLimit: true}}
	})
	t.Cleanup(func() { metrics.SetUsageSource(nil) })
	agent := serve(t, promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	// What the agent serves passes Prometheus' own linter.
	promtest.CheckMetrics(t, tool(t, "promtool"), agent)

	prom := promtest.Start(t, promtest.Config{Bin: bin, Target: agent, RulesFile: RulesFile, Node: "e2e-node"})

	// Scraped and evaluated with no doubt: web is normal (no condition
	// series), cache is suspended; nothing fires.
	promtest.WaitFor(t, 60*time.Second, "the agent scraped with nothing firing", func() (bool, string) {
		up := prom.Query(t, `up{job="unitlet-agent"} == 1 and on() count(unitlet_instance_condition{name="cache"}) > 0`)
		firing := prom.Firing(t)
		return len(up) == 1 && len(firing) == 0, fmt.Sprintf("up: %v, firing: %v", up, firing)
	})

	// Inject a kill that is not proven.
	metrics.SetInstanceConditions("shop", "web", []metav1.Condition{
		cond("Ready", "False", "KillUnproven"), cond("KillUnproven", "True", "CgroupNotEmpty"), cond("StartUncertain", "False", "Certain"),
	})
	want := []string{"UnitletInstanceNotReady shop/web", "UnitletKillUnproven shop/web"}
	promtest.WaitFor(t, 60*time.Second, "UnitletKillUnproven firing", func() (bool, string) {
		got := prom.Firing(t)
		return cmp.Equal(want, got), fmt.Sprintf("firing (-want,+got):\n%s", cmp.Diff(want, got))
	})

	// Every metric the dashboard and the rules name was scraped.
	for _, n := range prom.Missing(t, promtest.MetricNames(t, RulesFile, dashboardFile)) {
		t.Errorf("%s is named by the dashboard or the rules but was not scraped", n)
	}
	// The dashboard's queries are valid PromQL, and its node variable finds the node.
	for _, e := range promtest.DashboardExprs(t, dashboardFile) {
		e = strings.NewReplacer("$node", ".*", "$__rate_interval", "1m").Replace(e)
		if _, err := prom.API("/api/v1/query", url.Values{"query": {e}}); err != nil {
			t.Errorf("dashboard query %q: %v", e, err)
		}
	}
	if nodes := prom.LabelValues(t, "node", "unitlet_agent_info"); !cmp.Equal(nodes, []string{"e2e-node"}) {
		t.Errorf("node variable values: %v, want [e2e-node]", nodes)
	}
	// Instances not Ready by node: web and the suspending cache.
	notReady := notReadyExpr(t)
	if got := prom.Query(t, "("+notReady+") == 2"); len(got) != 1 || got[0]["node"] != "e2e-node" {
		t.Errorf("%s: want 2 for e2e-node, got series %v", notReady, got)
	}

	// Back to normal: web's series go, Prometheus marks them stale, and
	// both alerts resolve.
	metrics.SetInstanceConditions("shop", "web", settled)
	promtest.WaitFor(t, 60*time.Second, "the alerts resolved", func() (bool, string) {
		got := prom.Firing(t)
		return len(got) == 0, fmt.Sprintf("firing: %v", got)
	})
	if got := prom.Query(t, "("+notReady+") == 1"); len(got) != 1 || got[0]["node"] != "e2e-node" {
		t.Errorf("%s after web is Ready: want 1 for e2e-node (cache), got series %v", notReady, got)
	}
}

// notReadyExpr is the dashboard's query of Instances not Ready, for every
// node.
func notReadyExpr(t *testing.T) string {
	t.Helper()
	for _, e := range promtest.DashboardExprs(t, dashboardFile) {
		if strings.Contains(e, `unitlet_instance_condition{type="Ready"`) {
			return strings.ReplaceAll(e, "$node", ".*")
		}
	}
	t.Fatal("the dashboard has no query of Ready")
	return ""
}

// dashboardFile is the committed Grafana dashboard.
var dashboardFile = filepath.Join("..", "grafana", "unitlet-agent.json")

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("stop metrics server: %v", err)
		}
	})
	return ln.Addr().String()
}
