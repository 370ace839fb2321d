package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/exec"

	"github.com/unitlet/unitlet/runtime/logs"
)

// testClient is a client of the aggregated API on a server never dialled:
// the tables only build requests.
func testClient(t *testing.T) *rest.RESTClient {
	t.Helper()
	rc, err := relayClient(&rest.Config{Host: "https://api.example:6443"})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// Each flag of logs lands in the relay's query as the contract names it,
// on the Instance's path in the aggregated API; bad flags are usage
// errors.
func TestLogRequest(t *testing.T) {
	defaults := logsOptions{tail: -1, maxLogRequests: 5}
	with := func(f func(*logsOptions)) logsOptions { o := defaults; f(&o); return o }
	const path = "/apis/subresources.hosting.unitlet.dev/v1/namespaces/apps/instances/shop/log"
	tests := map[string]struct {
		opts      logsOptions
		wantQuery string
		wantErr   string
	}{
		"every line":      {opts: defaults, wantQuery: ""},
		"follow":          {opts: with(func(o *logsOptions) { o.follow = true }), wantQuery: "follow=true"},
		"since duration":  {opts: with(func(o *logsOptions) { o.since = "10m" }), wantQuery: "sinceSeconds=600"},
		"since rounds up": {opts: with(func(o *logsOptions) { o.since = "1500ms" }), wantQuery: "sinceSeconds=2"},
		"since a time":    {opts: with(func(o *logsOptions) { o.since = "2026-01-02T15:04:05Z" }), wantQuery: "sinceTime=2026-01-02T15%3A04%3A05Z"},
		"since-time":      {opts: with(func(o *logsOptions) { o.sinceTime = "2026-01-02T16:04:05+01:00" }), wantQuery: "sinceTime=2026-01-02T15%3A04%3A05Z"},
		"tail, limit, generation, role": {
			opts:      with(func(o *logsOptions) { o.tail, o.limitBytes, o.generation, o.role = 20, 4096, 3, "sidecar/proxy" }),
			wantQuery: "generation=3&limitBytes=4096&role=sidecar%2Fproxy&tailLines=20",
		},
		"seed":                 {opts: with(func(o *logsOptions) { o.role = "seed" }), wantQuery: "role=seed"},
		"since and since-time": {opts: with(func(o *logsOptions) { o.since, o.sinceTime = "1m", "2026-01-02T15:04:05Z" }), wantErr: "give one"},
		"since neither":        {opts: with(func(o *logsOptions) { o.since = "yesterday" }), wantErr: `--since "yesterday"`},
		"since negative":       {opts: with(func(o *logsOptions) { o.since = "-5m" }), wantErr: "positive duration"},
		"since-time no time":   {opts: with(func(o *logsOptions) { o.sinceTime = "10m" }), wantErr: "RFC 3339"},
		"tail 0":               {opts: with(func(o *logsOptions) { o.tail = 0 }), wantErr: "--tail 0"},
		"tail -2":              {opts: with(func(o *logsOptions) { o.tail = -2 }), wantErr: "--tail -2"},
		"limit negative":       {opts: with(func(o *logsOptions) { o.limitBytes = -1 }), wantErr: "--limit-bytes -1"},
		"generation negative":  {opts: with(func(o *logsOptions) { o.generation = -1 }), wantErr: "--generation -1"},
		"no log requests":      {opts: with(func(o *logsOptions) { o.maxLogRequests = 0 }), wantErr: "--max-log-requests 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q, err := tc.opts.query()
			if tc.wantErr != "" {
				var ue usageError
				if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u := logRequest(testClient(t), target{namespace: "apps", name: "shop"}, q).URL()
			if diff := cmp.Diff([]string{"api.example:6443", path, tc.wantQuery}, []string{u.Host, u.Path, u.RawQuery}); diff != "" {
				t.Errorf("request (-want,+got):\n%s", diff)
			}
		})
	}
}

// A reconnection asks from the last time printed, every line of it (the
// tail was taken by the first), and the bytes --limit-bytes has left.
func TestResume(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC)
	first := logQuery{follow: true, sinceSeconds: 600, tailLines: 10, limitBytes: 100, role: "seed", generation: 2}
	tests := map[string]struct {
		last time.Time
		read int64
		want logQuery
	}{
		"nothing printed yet": {read: 0, want: first},
		"after lines": {last: t0, read: 40,
			want: logQuery{follow: true, sinceTime: t0, limitBytes: 60, role: "seed", generation: 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := printer{last: tc.last, read: tc.read}
			if diff := cmp.Diff(tc.want, p.resume(first), cmp.AllowUnexported(logQuery{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	if got := logRequest(testClient(t), target{"a", "b"}, (&printer{last: t0}).resume(logQuery{follow: true})).URL().RawQuery; got != "follow=true&sinceTime=2026-12-01T10%3A00%3A00.000000005Z" {
		t.Errorf("resumed query %q: want the time to the nanosecond", got)
	}
}

// A selector's Instances are streamed one each; a follow holds them all
// open, so more than --max-log-requests is refused as kubectl refuses it.
func TestFanOut(t *testing.T) {
	tests := map[string]struct {
		names   []string
		follow  bool
		max     int
		want    []target
		wantErr bool
	}{
		"read three":        {names: []string{"a", "b", "c"}, max: 5, want: []target{{"ns", "a"}, {"ns", "b"}, {"ns", "c"}}},
		"read beyond max":   {names: []string{"a", "b", "c"}, max: 2, want: []target{{"ns", "a"}, {"ns", "b"}, {"ns", "c"}}},
		"follow up to max":  {names: []string{"a", "b"}, follow: true, max: 2, want: []target{{"ns", "a"}, {"ns", "b"}}},
		"follow beyond max": {names: []string{"a", "b", "c"}, follow: true, max: 2, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := fanOut("ns", tc.names, tc.follow, tc.max)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// run's command is what follows "--", sent as pods/exec's query: each
// word a command=, the streams it has, and tty (no stderr of its own on
// a terminal).
func TestRunRequest(t *testing.T) {
	const path = "/apis/subresources.hosting.unitlet.dev/v1/namespaces/apps/instances/shop/exec"
	tests := map[string]struct {
		args      []string
		dash      int
		stdin     bool
		tty       bool
		wantQuery url.Values
		wantErr   string
	}{
		"command": {args: []string{"shop", "sh", "-c", "exit 3"}, dash: 1,
			wantQuery: url.Values{"command": {"sh", "-c", "exit 3"}, "stdout": {"true"}, "stderr": {"true"}}},
		"stdin": {args: []string{"shop", "cat"}, dash: 1, stdin: true,
			wantQuery: url.Values{"command": {"cat"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}},
		"terminal": {args: []string{"shop", "/bin/sh"}, dash: 1, stdin: true, tty: true,
			wantQuery: url.Values{"command": {"/bin/sh"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}}},
		"no --":         {args: []string{"shop", "ls"}, dash: -1, wantErr: "after --"},
		"nothing after": {args: []string{"shop"}, dash: 1, wantErr: "after --"},
		"no name":       {args: []string{"ls"}, dash: 0, wantErr: "before --"},
		"two names":     {args: []string{"shop", "ledger", "ls"}, dash: 2, wantErr: "one Instance at a time"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst, argv, err := splitCommand(tc.args, tc.dash)
			if tc.wantErr != "" {
				var ue usageError
				if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u, err := runURL(testClient(t), target{namespace: "apps", name: inst}, runParams(argv, tc.stdin, tc.tty))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(path, u.Path); diff != "" {
				t.Errorf("path (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantQuery, u.Query()); diff != "" {
				t.Errorf("query (-want,+got):\n%s", diff)
			}
		})
	}
}

// What the API server (or the relay behind it) answers becomes a message
// that names the Instance, what was refused and what grants it.
func TestDescribe(t *testing.T) {
	shop := target{namespace: "apps", name: "shop"}
	gr := schema.GroupResource{Group: Group, Resource: "instances"}
	tests := map[string]struct {
		err  error
		a    action
		want string
	}{
		"forbidden log": {
			err:  apierrors.NewForbidden(gr, "shop", errors.New(`User "dev" cannot get resource "instances/log"`)),
			a:    readLogs,
			want: `you may not read logs of Instance shop in apps: instances.subresources.hosting.unitlet.dev "shop" is forbidden: User "dev" cannot get resource "instances/log" (403 Forbidden; RBAC: the view role grants get on instances/log)`,
		},
		"forbidden run": {
			err:  apierrors.NewForbidden(gr, "shop", errors.New("no")),
			a:    runIn,
			want: `you may not run commands in Instance shop in apps: instances.subresources.hosting.unitlet.dev "shop" is forbidden: no (403 Forbidden; RBAC: the edit role grants create on instances/run)`,
		},
		"unauthorized": {
			err:  apierrors.NewUnauthorized("Unauthorized"),
			a:    readLogs,
			want: "the API server did not accept your credentials (check --context, --user, --token): Unauthorized",
		},
		"no such Instance": {
			err:  apierrors.NewNotFound(gr, "shop"),
			a:    readLogs,
			want: "Instance shop in apps not found",
		},
		"no relay": {
			err:  &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}},
			a:    runIn,
			want: "the API server does not serve subresources.hosting.unitlet.dev/v1 for Instance shop in apps (is the unitlet relay installed and its APIService v1.subresources.hosting.unitlet.dev Available?): the server could not find the requested resource",
		},
		"unavailable": {
			err:  apierrors.NewServiceUnavailable("agent of node n1 unreachable"),
			a:    readLogs,
			want: "could not read logs of Instance shop in apps: the relay or the node's agent is unavailable: agent of node n1 unreachable",
		},
		"bad request": {
			err:  apierrors.NewBadRequest("tty is not supported yet"),
			a:    runIn,
			want: "could not run commands in Instance shop in apps: tty is not supported yet (400 BadRequest)",
		},
		"not a status": {err: errors.New("connection refused"), a: readLogs, want: "connection refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := describe(tc.err, tc.a, shop)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("%v does not wrap %v", got, tc.err)
			}
		})
	}
}

// A follow asks again when the relay or the agent was away, not when the
// request itself was refused.
func TestRetriable(t *testing.T) {
	gr := schema.GroupResource{Group: Group, Resource: "instances"}
	tests := map[string]struct {
		err  error
		want bool
	}{
		"cut stream":    {err: errors.New("unexpected EOF"), want: true},
		"unavailable":   {err: apierrors.NewServiceUnavailable("x"), want: true},
		"internal":      {err: apierrors.NewInternalError(errors.New("x")), want: true},
		"throttled":     {err: apierrors.NewTooManyRequests("x", 1), want: true},
		"forbidden":     {err: apierrors.NewForbidden(gr, "shop", errors.New("x")), want: false},
		"not found":     {err: apierrors.NewNotFound(gr, "shop"), want: false},
		"bad request":   {err: apierrors.NewBadRequest("x"), want: false},
		"described 403": {err: describe(apierrors.NewForbidden(gr, "shop", errors.New("x")), readLogs, target{"a", "shop"}), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, retriable(tc.err)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The plugin exits with the command's code, 130 when interrupted.
func TestExitCode(t *testing.T) {
	tests := map[string]struct {
		err         error
		interrupted bool
		wantCode    int
		wantErr     string
	}{
		"success":      {wantCode: 0},
		"exit 3":       {err: exec.CodeExitError{Err: errors.New("exit 3"), Code: 3}, wantCode: 3},
		"wrapped exit": {err: fmt.Errorf("stream: %w", exec.CodeExitError{Err: errors.New("x"), Code: 42}), wantCode: 42},
		"interrupted":  {err: errors.New("context canceled"), interrupted: true, wantCode: ExitInterrupted},
		"refused":      {err: apierrors.NewBadRequest("tty is not supported yet"), wantErr: "could not run commands in Instance shop in apps: tty is not supported yet (400 BadRequest)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := t.Context(), func() {}
			if tc.interrupted {
				ctx, cancel = contextCancelled(ctx)
			}
			defer cancel()
			code, err := exitCode(ctx, tc.err, target{"apps", "shop"}, &bytes.Buffer{})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff([]any{tc.wantCode, tc.wantErr}, []any{code, gotErr}); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// -t is honoured with -i from a terminal, as with kubectl exec; otherwise
// the plugin says why it runs without one.
func TestUseTTY(t *testing.T) {
	tests := map[string]struct {
		stdin, tty, terminal bool
		want                 bool
		wantWarning          string
	}{
		"no -t":             {stdin: true, terminal: true},
		"-it from terminal": {stdin: true, tty: true, terminal: true, want: true},
		"-t without -i":     {tty: true, terminal: true, wantWarning: "-t needs -i"},
		"-it from a pipe":   {stdin: true, tty: true, wantWarning: "stdin is not a terminal"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, why := useTTY(tc.stdin, tc.tty, tc.terminal)
			if got != tc.want || !strings.Contains(why, tc.wantWarning) || (tc.wantWarning == "") != (why == "") {
				t.Errorf("useTTY = %v, %q; want %v, %q", got, why, tc.want, tc.wantWarning)
			}
		})
	}
}

// A reconnection asks again from the last time printed: what was printed
// at that time is not printed twice, what is new at it is; a line that is
// no record is printed as it came.
func TestPrinterPrintsOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := func(d time.Duration, text string) string {
		return logs.Record{Time: t0.Add(d), Source: "g1", Text: text}.Line()
	}
	tests := map[string]struct {
		opts followOptions
		want string
	}{
		"plain":          {want: "a\nb\nc\nc2\nnot a record\nd\n"},
		"prefix":         {opts: followOptions{prefix: true}, want: "[g1] a\n[g1] b\n[g1] c\n[g1] c2\nnot a record\n[g1] d\n"},
		"prefix with -l": {opts: followOptions{prefix: true, withName: true}, want: "[instance/shop/g1] a\n[instance/shop/g1] b\n[instance/shop/g1] c\n[instance/shop/g1] c2\n[instance/shop] not a record\n[instance/shop/g1] d\n"},
		"timestamps": {opts: followOptions{timestamps: true},
			want: "2026-12-01T10:00:00Z a\n2026-12-01T10:00:00.001Z b\n2026-12-01T10:00:00.001Z c\n2026-12-01T10:00:00.001Z c2\nnot a record\n2026-12-01T10:00:00.002Z d\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			w := &lineWriter{w: bufio.NewWriter(&b)}
			p := printer{w: w, target: target{"apps", "shop"}, opts: tc.opts}
			for _, l := range []string{rec(0, "a"), rec(time.Millisecond, "b"), rec(time.Millisecond, "c")} {
				p.print(l)
			}
			// Reconnected: from the last time, again.
			for _, l := range []string{rec(time.Millisecond, "b"), rec(time.Millisecond, "c"), rec(time.Millisecond, "c2"), "not a record", rec(2*time.Millisecond, "d")} {
				p.print(l)
			}
			w.Flush()
			if d := cmp.Diff(tc.want, b.String()); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func contextCancelled(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx, cancel
}
