package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/api/subresources"
	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/relaytrust"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/relayproc"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// BenchmarkPluginThroughRelay times what a user waits for: the first
// byte of `kubectl unitlet logs NAME` (and with `--tail 1`) and the whole
// of `kubectl unitlet run NAME -- /bin/true`, the built plugin binary each
// time, as a user with edit (a ServiceAccount token), through the API
// server and the relay to one agent. Beside them, in the same run, what
// the path is made of: the plugin's own start (`version`), `kubectl get
// --raw /readyz`, the same /readyz and the relay's log asked in process
// through the API server (connection kept: no process start), and the
// agent's own log and run asked directly over mutual TLS with the relay's
// client certificate, as the relay asks (connection kept). p50 and p90
// per operation (docs/reports/benchmarks.md):
//
//	go test -count=1 -run '^$' -bench PluginThroughRelay -benchtime 50x ./test/e2e/
func BenchmarkPluginThroughRelay(b *testing.B) {
	node, name, user, token := benchInstance(b)
	cases := pluginCases(b, name, user, token)
	api := apiClient(b, token)
	logURL := apiHost() + "/apis/" + subresources.Group + "/" + subresources.Version +
		"/namespaces/default/instances/" + name + "/log?tailLines=1"
	cases["api-relay-logs-tail-1-first-byte"] = func() (time.Duration, error) { return getFirstByte(api, logURL) }
	direct := directAgent(b, node)
	cases["raw-agent-logs-tail-1-first-byte"] = func() (time.Duration, error) { return direct.logFirstByte(name) }
	cases["raw-agent-run-true"] = func() (time.Duration, error) { return direct.runTrue(name) }
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		b.Run(name, func(b *testing.B) { timeEach(b, cases[name]) })
	}
}

// benchInstance starts one agent and the ticker app on it, and makes a
// user with edit (and view); it returns the node, the Instance, the
// user's kubeconfig and token once the plugin reads the app's lines.
func benchInstance(b *testing.B) (node, name, user, token string) {
	a := agentproc.New(b, "e2e-bench", runID, kubeconfig)
	a.Args = []string{"--socket-group", proxyGroup}
	b.Cleanup(func() { a.Stop(syscall.SIGTERM); a.Sweep(b) })
	a.Launch(b)
	inst := testutil.Sample(b, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name = "bench-ticker"
	inst.Spec.Template.Args = []string{"-c", testutil.TickerApp}
	if err := k8s.Create(context.Background(), inst); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kube.DeleteAndWait(b, inst.Name, time.Minute) })
	kube.WaitServing(b, inst.Name, 1)
	_, token = testutil.PluginUsers(b, kubectl, "default", testutil.UnitletRoles, "bench-view", "bench-edit")
	user = filepath.Join(b.TempDir(), "bench-edit.kubeconfig")
	if err := os.WriteFile(user, testutil.Kubeconfig(b, env.Config.Host, env.Config.CAData, "default", "bench-edit", token), 0o600); err != nil {
		b.Fatal(err)
	}
	testutil.Eventually(b, "the plugin reads the app's ticks", 30*time.Second, pollEvery, func() (bool, string) {
		out, err := as(user, testutil.PluginBinary(), "logs", inst.Name).CombinedOutput()
		return err == nil && strings.Contains(string(out), "tick g1"), string(out)
	})
	return a.Node, inst.Name, user, token
}

// pluginCases are the operations both paths have: the plugin's logs and
// run, its start alone, and the API server's /readyz by kubectl and in
// process.
func pluginCases(b *testing.B, name, user, token string) map[string]func() (time.Duration, error) {
	plugin := testutil.PluginBinary()
	kubectlBin := filepath.Join(testenv.RepoRoot(), "bin", "kubectl")
	api := apiClient(b, token)
	return map[string]func() (time.Duration, error){
		"plugin-logs-first-byte":        func() (time.Duration, error) { return firstByte(as(user, plugin, "logs", name)) },
		"plugin-logs-tail-1-first-byte": func() (time.Duration, error) { return firstByte(as(user, plugin, "logs", name, "--tail", "1")) },
		"plugin-run-true":               func() (time.Duration, error) { return wall(as(user, plugin, "run", name, "--", "/bin/true")) },
		"plugin-version":                func() (time.Duration, error) { return wall(as(user, plugin, "version")) },
		"kubectl-get-raw-readyz":        func() (time.Duration, error) { return wall(as(user, kubectlBin, "get", "--raw", "/readyz")) },
		"api-readyz-first-byte":         func() (time.Duration, error) { return getFirstByte(api, apiHost()+"/readyz") },
	}
}

// apiClient is an HTTP client of the API server with the user's token,
// its connection kept between requests.
func apiClient(b *testing.B, token string) *http.Client {
	c, err := rest.HTTPClientFor(&rest.Config{Host: env.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// apiHost is the API server's URL without the trailing slash envtest's
// has.
func apiHost() string { return strings.TrimSuffix(env.Config.Host, "/") }

// getFirstByte times a GET to its first byte of body; it wants 200.
func getFirstByte(c *http.Client, url string) (time.Duration, error) {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, one); err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s, %v", url, resp.Status, err)
	}
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, resp.Body)
	return d, nil
}

// as is a command run as the user of kubeconfig.
func as(kubeconfig, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return cmd
}

// timeEach runs op b.N times and reports the median and p90 of its own
// figure (the process's first byte or end, not the loop's overhead).
func timeEach(b *testing.B, op func() (time.Duration, error)) {
	ds := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		d, err := op()
		if err != nil {
			b.Fatalf("run %d: %v", i, err)
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[(len(ds)*9+9)/10-1]), "p90-ms")
}

// firstByte starts cmd and times its first byte of stdout; it then
// reads the rest and wants exit 0.
func firstByte(cmd *exec.Cmd) (time.Duration, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	one := make([]byte, 1)
	_, rerr := io.ReadFull(out, one)
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil || rerr != nil {
		return 0, fmt.Errorf("%s: %v, first byte: %v: %s", cmd.Args, err, rerr, stderr.String())
	}
	return d, nil
}

// wall times cmd from start to exit and wants exit 0.
func wall(cmd *exec.Cmd) (time.Duration, error) {
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", cmd.Args, err, out)
	}
	return time.Since(start), nil
}

// agentDirect asks a node's agent as the relay does: the relay's client
// certificate (the relay CA relayproc's relay made), the endpoint and CA
// the agent published in its Enrollment, one kept connection.
type agentDirect struct {
	addr string
	http *http.Client
}

func directAgent(b *testing.B, node string) *agentDirect {
	ctx := context.Background()
	ca, err := relaytrust.EnsureCA(ctx, k8s, relayproc.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	var enr v1.Enrollment
	if err := k8s.Get(ctx, client.ObjectKey{Name: node}, &enr); err != nil || enr.Status.Endpoint == nil {
		b.Fatalf("Enrollment %s's endpoint: %v", node, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(enr.Status.Endpoint.CABundle)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: agentapi.ServerName(node), GetClientCertificate: ca.ClientCertificate().GetClientCertificate,
	}}
	b.Cleanup(tr.CloseIdleConnections)
	return &agentDirect{addr: enr.Status.Endpoint.Address, http: &http.Client{Transport: tr}}
}

func (a *agentDirect) logFirstByte(name string) (time.Duration, error) {
	return getFirstByte(a.http, "https://"+a.addr+agentapi.LogPath("default", name)+"?"+agentapi.LogQuery{TailLines: 1}.Encode())
}

func (a *agentDirect) runTrue(name string) (time.Duration, error) {
	start := time.Now()
	body := bytes.NewReader(agentapi.WriteRunRequest(agentapi.RunRequest{Command: []string{"/bin/true"}, RequestedBy: "bench"}))
	resp, err := a.http.Post("https://"+a.addr+agentapi.RunPath("default", name), "application/json", body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("agent run: %s", resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	for {
		kind, payload, err := agentapi.ReadFrame(r)
		if err != nil {
			return 0, fmt.Errorf("agent run: %w", err)
		}
		switch kind {
		case agentapi.FrameExit:
			var exit agentapi.RunExit
			if err := json.Unmarshal(payload, &exit); err != nil || exit.ExitCode != 0 {
				return 0, fmt.Errorf("agent run: exit %s (%v)", payload, err)
			}
			return time.Since(start), nil
		case agentapi.FrameError:
			return 0, fmt.Errorf("agent run: %s", payload)
		}
	}
}
