package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/cluster/relay"
)

// TestRelayThroughAPIServer: users reach logs and runs through the API
// server only; the relay answers what they may do and nothing else.
func TestRelayThroughAPIServer(t *testing.T) {
	h := startHarness(t)

	t.Run("discovery lists the subresources and their verbs", func(t *testing.T) {
		list, err := discovery.NewDiscoveryClientForConfigOrDie(h.viewer).ServerResourcesForGroupVersion(relay.Group + "/" + relay.Version)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, r := range list.APIResources {
			got[r.Name] = r.Verbs
		}
		want := map[string][]string{"instances/log": {"get"}, "instances/run": {"get", "create"}, "instances/exec": {"get", "create"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("discovery (-want,+got):\n%s", diff)
		}
	})

	t.Run("a viewer reads a log, its query mapped onto the agent's", func(t *testing.T) {
		code, body := get(t, h.viewer, instancePath("web", "log")+"?sinceSeconds=300&tailLines=2&limitBytes=100&generation=4&role=seed")
		want := "log of shop/web since=5m0s tail=2 limit=100 generation=4 role=seed\n"
		if diff := cmp.Diff([]any{http.StatusOK, want}, []any{code, body}); diff != "" {
			t.Errorf("log (-want,+got):\n%s", diff)
		}
	})

	t.Run("a followed log comes line by line", func(t *testing.T) {
		h.followOneLineAtATime(t)
	})

	t.Run("errors are Status objects with their codes", func(t *testing.T) {
		tests := map[string]struct {
			path       string
			wantCode   int
			wantReason metav1.StatusReason
		}{
			"a bad query":               {path: instancePath("web", "log") + "?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
			"no such Instance":          {path: instancePath("nope", "log"), wantCode: 404, wantReason: metav1.StatusReasonNotFound},
			"a node with no agent":      {path: instancePath("elsewhere", "log"), wantCode: 503, wantReason: metav1.StatusReasonServiceUnavailable},
			"the agent's own refusal":   {path: instancePath("gone", "log"), wantCode: 404, wantReason: metav1.StatusReasonNotFound},
			"no command, on a terminal": {path: instancePath("web", "run") + "?stdin=true&tty=true", wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				cfg := h.viewer
				if strings.Contains(tc.path, "/run") {
					cfg = h.runner
				}
				code, body := get(t, cfg, tc.path)
				var st metav1.Status
				if code != http.StatusOK {
					if err := json.Unmarshal([]byte(body), &st); err != nil {
						t.Fatalf("answer %d is no Status: %v: %q", code, err, body)
					}
				}
				if diff := cmp.Diff([]any{tc.wantCode, tc.wantReason}, []any{code, st.Reason}); diff != "" {
					t.Errorf("answer (-want,+got):\n%s\n%s", diff, body)
				}
			})
		}
	})

	t.Run("a viewer may not run", func(t *testing.T) {
		_, _, err := stream(t, h.viewer, "POST", instancePath("web", "run"), []string{"greet", "x"}, "")
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("run as viewer: got %v, want forbidden", err)
		}
	})

	t.Run("a runner runs: stdout, stderr, exit code (SPDY)", func(t *testing.T) {
		stdout, stderr, err := stream(t, h.runner, "POST", instancePath("web", "run"), []string{"greet", "world"}, "")
		if diff := cmp.Diff([]any{"hello world\n", "oops\n", 3}, []any{stdout, stderr, exitCode(err)}); diff != "" {
			t.Errorf("run (-want,+got):\n%s\nerror: %v", diff, err)
		}
	})

	t.Run("a runner execs with stdin (WebSocket)", func(t *testing.T) {
		stdout, _, err := stream(t, h.runner, "GET", instancePath("web", "exec"), []string{"cat"}, "piped in\n")
		if diff := cmp.Diff("piped in\n", stdout); diff != "" || err != nil {
			t.Errorf("exec (-want,+got):\n%s\nerror: %v", diff, err)
		}
	})

	t.Run("a runner's exit code over WebSocket", func(t *testing.T) {
		stdout, stderr, err := stream(t, h.runner, "GET", instancePath("web", "run"), []string{"greet", "ws"}, "")
		if diff := cmp.Diff([]any{"hello ws\n", "oops\n", 3}, []any{stdout, stderr, exitCode(err)}); diff != "" {
			t.Errorf("run (-want,+got):\n%s\nerror: %v", diff, err)
		}
	})

	t.Run("directly, without the front-proxy certificate: 401", func(t *testing.T) {
		code, _ := h.direct(t, false, "viewer", instancePath("web", "log"))
		if code != http.StatusUnauthorized {
			t.Errorf("direct request without a front-proxy certificate: %d, want 401", code)
		}
	})

	t.Run("directly as the front proxy, for a user who may not run: the relay's own 403", func(t *testing.T) {
		code, _ := h.direct(t, true, "viewer", instancePath("web", "run")+"?command=greet&stdout=true")
		if code != http.StatusForbidden {
			t.Errorf("the relay's review of viewer's run: %d, want 403", code)
		}
	})
}

// followOneLineAtATime reads a followed log's first line before the
// agent writes its second: the relay and the API server flush.
func (h *harness) followOneLineAtATime(t *testing.T) {
	hc, err := rest.HTTPClientFor(h.viewer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiURL(h.viewer, instancePath("web", "log")+"?follow=true"), nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	close(h.agent.release)
	second, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("second line: %v", err)
	}
	want := []string{"log of shop/web since= tail=0 limit=0 generation=0 role=\n", "second line\n"}
	if diff := cmp.Diff(want, []string{first, second}); diff != "" {
		t.Errorf("followed log (-want,+got):\n%s", diff)
	}
}

// get is a GET through the API server as the user of cfg.
func get(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(apiURL(cfg, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stream runs argv through the API server as kubectl exec does: SPDY for
// POST, WebSocket for GET.
func stream(t *testing.T, cfg *rest.Config, method, path string, argv []string, stdin string) (string, string, error) {
	t.Helper()
	q := url.Values{"command": argv, "stdout": {"true"}, "stderr": {"true"}}
	if stdin != "" {
		q.Set("stdin", "true")
	}
	u, err := url.Parse(apiURL(cfg, path+"?"+q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	var ex remotecommand.Executor
	if method == http.MethodGet {
		ex, err = remotecommand.NewWebSocketExecutor(cfg, method, u.String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(cfg, method, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, opts)
	return stdout.String(), stderr.String(), err
}

// direct requests the relay itself, trusting the caBundle it wrote into
// its APIService; asProxy presents the front-proxy certificate with the
// user in its headers, as the API server does.
func (h *harness) direct(t *testing.T, asProxy bool, user, path string) (int, string) {
	t.Helper()
	var as unstructured.Unstructured
	as.SetAPIVersion("apiregistration.k8s.io/v1")
	as.SetKind("APIService")
	if err := h.admin.Get(context.Background(), client.ObjectKey{Name: relay.APIServiceName}, &as); err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(as.Object, "spec", "caBundle")
	caPEM, err := base64.StdEncoding.DecodeString(bundle)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the APIService's caBundle holds no certificate")
	}
	tc := &tls.Config{RootCAs: roots, ServerName: relay.ServingName(relay.ServiceName, relayNS)}
	if asProxy {
		tc.Certificates = []tls.Certificate{h.fp.Client}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, "https://"+h.relayAddr+path, nil)
	req.Header.Set("X-Remote-User", user)
	req.Header.Set("X-Remote-Group", "system:authenticated")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiURL is path on the API server of cfg (whose Host may end in /).
func apiURL(cfg *rest.Config, path string) string {
	return strings.TrimSuffix(cfg.Host, "/") + path
}
