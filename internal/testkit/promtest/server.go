package promtest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// Job is the scrape job name the rules expect for the agents.
const Job = "unitlet-agent"

// InstallHint says what to run when the Debian prometheus package is missing.
const InstallHint = "run hack/prometheus-tests.sh --install or make deps (Debian's prometheus package: promtool and the server)"

// Binary finds a binary of the prometheus package or fails the test with
// InstallHint: the tests that need it are the point, never skipped.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: %s", name, InstallHint)
	}
	return path
}

// Config is what Start runs.
type Config struct {
	Bin       string // the prometheus binary
	Target    string // host:port of the agent's /metrics, scraped every second
	RulesFile string // alert rules, loaded with every for: cut to 0s
	Node      string // the node label the target gets, as the ServiceMonitor adds it
}

// Server is a running Prometheus; Base is its http:// address.
type Server struct{ Base string }

var forClause = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+$`)

// Start runs Prometheus on loopback with a temp storage dir until the test
// ends (SIGTERM, then SIGKILL of its process group); its log is printed
// when the test failed.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(cfg.RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "rules.yaml"), forClause.ReplaceAllString(string(rules), "${1}0s"))
	// As the ServiceMonitor: the target has the Prometheus Operator's
	// namespace label (the Service's), and honor_labels keeps the
	// per-Instance series' own namespace over it.
	write(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: %s
    honor_labels: true
    static_configs:
      - targets: [%q]
        labels: {node: %q, namespace: unitlet-system}
`, Job, cfg.Target, cfg.Node))
	addr := FreeAddr(t)
	cmd := exec.Command(cfg.Bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
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
	s := &Server{Base: "http://" + addr}
	WaitFor(t, 30*time.Second, "prometheus ready", func() (bool, string) {
		select {
		case err := <-done:
			done <- err // for the cleanup's wait
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(s.Base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return s
}

// FreeAddr is a loopback address nothing listens on right now.
func FreeAddr(t testing.TB) string { return testutil.FreePort(t) }

// WaitFor polls cond every 250 ms until it holds or timeout passes; state
// describes the last look for the failure message.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, what, timeout, 250*time.Millisecond, cond)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// CheckMetrics runs `promtool check metrics` on what http://addr/metrics
// serves now: the names, types and HELP of every family, as Prometheus'
// own linter reads them. Each problem fails the test.
func CheckMetrics(t testing.TB, promtool, addr string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", addr, resp.Status)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics of %s: %v\n%s", addr, err, out)
	}
}
