package prometheus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/unitlet/unitlet/internal/metrics"
)

// A real Prometheus scrapes controller-runtime's registry, where
// internal/metrics lives, with rules.yaml loaded (for: cut to 0s). An
// injected KillUnproven reaches firing in Prometheus' own API, and every
// metric the dashboard and the rules name was scraped.
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
	metrics.SetInstanceConditions("shop", "web", []metav1.Condition{
		cond("Ready", "True", "Reconciled"), cond("KillUnproven", "False", "Proven"), cond("StartUncertain", "False", "Certain"),
	})
	t.Cleanup(func() { metrics.DeleteInstance("shop", "web") })
	agent := serve(t, promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))

	prom := startPrometheus(t, bin, agent)

	// Scraped and evaluated with no doubt: nothing fires.
	waitFor(t, 60*time.Second, "the agent scraped with nothing firing", func() (bool, string) {
		up := prom.query(t, `up{job="unitlet-agent"} == 1 and on() count(unitlet_instance_condition{instance="web"}) > 0`)
		firing := prom.firing(t)
		return len(up) == 1 && len(firing) == 0, fmt.Sprintf("up: %v, firing: %v", up, firing)
	})

	// Inject a kill that is not proven.
	metrics.SetInstanceConditions("shop", "web", []metav1.Condition{
		cond("Ready", "False", "KillUnproven"), cond("KillUnproven", "True", "CgroupNotEmpty"), cond("StartUncertain", "False", "Certain"),
	})
	want := []string{"UnitletInstanceNotReady shop/web", "UnitletKillUnproven shop/web"}
	waitFor(t, 60*time.Second, "UnitletKillUnproven firing", func() (bool, string) {
		got := prom.firing(t)
		return cmp.Equal(want, got), fmt.Sprintf("firing (-want,+got):\n%s", cmp.Diff(want, got))
	})

	// Every metric the dashboard and the rules name was scraped.
	scraped := map[string]bool{}
	for _, n := range prom.labelValues(t, "__name__", "") {
		scraped[n] = true
	}
	for _, n := range metricNames(t) {
		if !scraped[n] {
			t.Errorf("%s is named by the dashboard or the rules but was not scraped", n)
		}
	}
	// The dashboard's queries are valid PromQL, and its node variable finds the node.
	for _, e := range dashboardExprs(t) {
		e = strings.NewReplacer("$node", ".*", "$__rate_interval", "1m").Replace(e)
		if _, err := prom.api("/api/v1/query", url.Values{"query": {e}}); err != nil {
			t.Errorf("dashboard query %q: %v", e, err)
		}
	}
	if nodes := prom.labelValues(t, "node", "unitlet_agent_info"); !cmp.Equal(nodes, []string{"e2e-node"}) {
		t.Errorf("node variable values: %v, want [e2e-node]", nodes)
	}
}

type promServer struct{ base string }

// startPrometheus runs bin on loopback with a temp storage dir, scraping
// target every second, rules with for: 0s; it is stopped at cleanup.
func startPrometheus(t *testing.T, bin, target string) promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+$`).ReplaceAll(rules, []byte("${1}0s"))
	write(t, filepath.Join(dir, "rules.yaml"), string(rules))
	write(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: unitlet-agent
    honor_labels: true
    static_configs:
      - targets: [%q]
        labels: {node: e2e-node}
`, target))
	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	p := promServer{base: "http://" + addr}
	waitFor(t, 30*time.Second, "prometheus ready", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// api GETs path and returns the data of a successful answer.
func (p promServer) api(path string, q url.Values) (json.RawMessage, error) {
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, body.Status, body.Error)
	}
	return body.Data, nil
}

func (p promServer) query(t *testing.T, expr string) []map[string]string {
	t.Helper()
	data, err := p.api("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, s := range r.Result {
		out = append(out, s.Metric)
	}
	return out
}

// firing lists "alertname namespace/instance" of alerts in state firing,
// as Prometheus' /api/v1/alerts reports them, sorted.
func (p promServer) firing(t *testing.T) []string {
	t.Helper()
	data, err := p.api("/api/v1/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range r.Alerts {
		if a.State == "firing" {
			out = append(out, a.Labels["alertname"]+" "+a.Labels["namespace"]+"/"+a.Labels["instance"])
		}
	}
	sort.Strings(out)
	return out
}

func (p promServer) labelValues(t *testing.T, label, match string) []string {
	t.Helper()
	q := url.Values{}
	if match != "" {
		q.Set("match[]", match)
	}
	data, err := p.api("/api/v1/label/"+label+"/values", q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var metricName = regexp.MustCompile(`\bunitlet_[a-z_]+\b|\bup\b`)

// metricNames are the metrics the dashboard's queries and the rules name.
func metricNames(t *testing.T) []string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, RulesFile, &rules)
	exprs := dashboardExprs(t)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("found only %v in the dashboard and rules", out)
	}
	return out
}

// dashboardExprs are the expr of every target in the committed dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "grafana", "unitlet-agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

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

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or timeout passes; state describes
// the last look for the failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
