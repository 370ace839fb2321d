package plugin

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// checkOnlyAPIServer fails unless every request of the plugin went to the
// API server, with the user's token, on the paths of the Instances and
// their subresources, and none reached the agent whose address the API
// server publishes.
func checkOnlyAPIServer(t *testing.T, f *fakeAPI, res pluginResult) {
	t.Helper()
	api, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.hosts) == 0 {
		t.Errorf("the plugin's clients sent nothing the test saw")
	}
	for _, h := range res.hosts {
		if h != api.Host {
			t.Errorf("a request to %s, not the API server %s", h, api.Host)
		}
	}
	for _, r := range f.requests() {
		if !strings.HasPrefix(r.Path, logsBase) && r.Path != "/apis/hosting.unitlet.dev/v1alpha1/namespaces/"+apiNS+"/instances" {
			t.Errorf("the plugin asked the API server for %s %s", r.Method, r.Path)
		}
		if r.Auth != "Bearer "+userToken {
			t.Errorf("%s %s: Authorization %q, want the user's token", r.Method, r.Path, r.Auth)
		}
	}
	if n := f.agentConns.Load(); n != 0 {
		t.Errorf("%d connections to the node's agent", n)
	}
}

// logs of one Instance, of a selector's, and a refusal: the relay's query
// as the flags say, the lines as the agent wrote them, and the server's
// 403 as a message naming the Instance and the role that grants it.
func TestLogsThroughAPIServer(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		wantQuery  map[string]string // path -> query
	}{
		"one Instance": {
			args:       []string{"logs", "shop-a", "--tail", "5", "--since-time", "2026-12-01T09:00:00Z", "--role", "run"},
			wantStdout: "shop-a line 0\nshop-a line 1\n",
			wantQuery:  map[string]string{logsBase + "shop-a/log": "role=run&sinceTime=2026-12-01T09%3A00%3A00Z&tailLines=5"},
		},
		"prefix and timestamps": {
			args:       []string{"logs", "shop-a", "--prefix", "--timestamps", "--limit-bytes", "100"},
			wantStdout: "2026-12-01T10:00:00Z [g1] shop-a line 0\n2026-12-01T10:00:01Z [g1] shop-a line 1\n",
			wantQuery:  map[string]string{logsBase + "shop-a/log": "limitBytes=100"},
		},
		"selector, prefixed, in name order": {
			args:       []string{"logs", "-l", "app=shop", "--generation", "1"},
			wantStdout: "[instance/shop-a/g1] shop-a line 0\n[instance/shop-a/g1] shop-a line 1\n[instance/shop-b/g1] shop-b line 0\n[instance/shop-b/g1] shop-b line 1\n",
			wantQuery:  map[string]string{logsBase + "shop-a/log": "generation=1", logsBase + "shop-b/log": "generation=1"},
		},
		"selector without prefix": {
			args:       []string{"logs", "-l", "app=shop", "--prefix=false"},
			wantStdout: "shop-a line 0\nshop-a line 1\nshop-b line 0\nshop-b line 1\n",
			wantQuery:  map[string]string{logsBase + "shop-a/log": "", logsBase + "shop-b/log": ""},
		},
		"selector picking none": {
			args:       []string{"logs", "-l", "app=none"},
			wantStderr: `No Instances in apps match "app=none".`,
			wantQuery:  map[string]string{},
		},
		"forbidden": {
			args:       []string{"logs", "secret"},
			wantCode:   ExitError,
			wantStderr: `error: you may not read logs of Instance secret in apps: instances/log.subresources.hosting.unitlet.dev "secret" is forbidden: User "dev" cannot get resource "instances/log" in API group "subresources.hosting.unitlet.dev" in the namespace "apps" (403 Forbidden; RBAC: the view role grants get on instances/log)`,
			wantQuery:  map[string]string{logsBase + "secret/log": ""},
		},
		"a name and a selector": {
			args:       []string{"logs", "shop-a", "-l", "app=shop"},
			wantCode:   ExitUsage,
			wantStderr: "name one Instance, or select Instances with -l SELECTOR (not both)",
			wantQuery:  map[string]string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t)
			res := f.runPlugin(t.Context(), nil, nil, tc.args...)
			if diff := cmp.Diff([]any{tc.wantCode, tc.wantStdout}, []any{res.code, res.stdout}); diff != "" {
				t.Errorf("exit code and stdout (-want,+got):\n%s\nstderr: %s", diff, res.stderr)
			}
			if !strings.Contains(res.stderr, tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", res.stderr, tc.wantStderr)
			}
			got := map[string]string{}
			for _, r := range f.requests() {
				if strings.HasSuffix(r.Path, "/log") {
					got[r.Path] = r.Query
				}
			}
			if diff := cmp.Diff(tc.wantQuery, got); diff != "" {
				t.Errorf("log requests (-want,+got):\n%s", diff)
			}
			if tc.wantCode != ExitUsage {
				checkOnlyAPIServer(t, f, res)
			}
		})
	}
}

// -l with -f follows every Instance at once: both streams are open
// together, and the plugin ends cleanly when interrupted.
func TestLogsFollowSelectorConcurrently(t *testing.T) {
	f := newFakeAPI(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan pluginResult, 1)
	go func() { done <- f.runPlugin(ctx, nil, &out, "logs", "-l", "app=shop", "-f") }()
	waitFor(t, func() bool {
		return strings.Contains(out.String(), "shop-a line 1") && strings.Contains(out.String(), "shop-b line 1")
	})
	cancel()
	res := <-done
	if res.code != 0 {
		t.Errorf("exit code %d, stderr %s", res.code, res.stderr)
	}
	for _, q := range []string{"shop-a", "shop-b"} {
		if f.logCalls[q] != 1 {
			t.Errorf("%s asked %d times, want once", q, f.logCalls[q])
		}
	}
	res.stdout = out.String()
	checkOnlyAPIServer(t, f, res)

	// More than --max-log-requests: refused before any stream.
	res = newFakeAPI(t).runPlugin(t.Context(), nil, nil, "logs", "-l", "app=shop", "-f", "--max-log-requests", "1")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "you are attempting to follow 2 log streams, but maximum allowed concurrency is 1") {
		t.Errorf("over the bound: exit %d, stderr %s", res.code, res.stderr)
	}
}

// A follow whose stream the relay cuts (an agent restart) asks again from
// the last line printed and prints nothing twice; a refusal ends it.
func TestLogsFollowReconnects(t *testing.T) {
	f := newFakeAPI(t)
	f.logs = func(w http.ResponseWriter, r *http.Request, name string, call int) {
		switch call {
		case 1: // lines 0, 1, then the stream is cut
			writeRecords(w, name, 0, 2)
		case 2: // from line 1's time on: line 1 again, then 2
			writeRecords(w, name, 1, 3)
			<-r.Context().Done()
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan pluginResult, 1)
	go func() { done <- f.runPlugin(ctx, nil, &out, "logs", "shop-a", "-f", "--tail", "10") }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "line 2") })
	cancel()
	res := <-done
	if diff := cmp.Diff("shop-a line 0\nshop-a line 1\nshop-a line 2\n", out.String()); diff != "" {
		t.Errorf("stdout (-want,+got):\n%s", diff)
	}
	var queries []string
	for _, r := range f.requests() {
		queries = append(queries, r.Query)
	}
	want := []string{"follow=true&tailLines=10", "follow=true&sinceTime=" + url.QueryEscape(t0.Add(time.Second).Format(time.RFC3339Nano))}
	if diff := cmp.Diff(want, queries); diff != "" {
		t.Errorf("queries (-want,+got):\n%s", diff)
	}
	if !strings.Contains(res.stderr, "log stream of Instance shop-a in apps cut") {
		t.Errorf("stderr %q does not say the stream was cut", res.stderr)
	}
	res.stdout = out.String()
	checkOnlyAPIServer(t, f, res)

	// Refused at the first request: no retry, the message.
	f = newFakeAPI(t)
	res = f.runPlugin(t.Context(), nil, nil, "logs", "secret", "-f")
	if res.code != ExitError || !strings.Contains(res.stderr, "you may not read logs of Instance secret in apps") || len(f.requests()) != 1 {
		t.Errorf("refused follow: exit %d, %d requests, stderr %s", res.code, len(f.requests()), res.stderr)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
