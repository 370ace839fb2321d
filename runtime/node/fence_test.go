package node

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/prepare"
)

// TestPromoteMovesTheFence: only the promoted generation may write
// through its control socket; promoting its successor and retiring it
// take that away.
func TestPromoteMovesTheFence(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r1, r2 := e.appRequest("fence", 1), e.appRequest("fence", 2)
	for _, r := range []StartRequest{r1, r2} {
		e.retireAtEnd(t, r.Ref)
		got := e.node.Start(ctx, r)
		if got.Start.Kind != outcome.Running || len(got.Warnings) != 0 {
			t.Fatalf("start %d: %v (%v) warnings %v", r.Generation, got.Start.Kind, got.Start.Cause, got.Warnings)
		}
		waitReady(ctx, t, e.node, r.Ref)
	}
	li, err := e.lay.Instance(r1.Namespace, r1.Name)
	if err != nil {
		t.Fatal(err)
	}
	env, err := instancefs.ReadEnv(li.PrivateDir(), layout.EnvFileName)
	if err != nil {
		t.Fatal(err)
	}
	token := env[prepare.EnvAdminToken]
	write := func(n int64) int {
		app, _ := li.AppSocket(n)
		return putSchedules(ctx, t, layout.ControlSocket(app), token)
	}
	type codes struct{ G1, G2 int }
	steps := []struct {
		name string
		do   func()
		want codes
	}{
		{"none promoted", func() {}, codes{409, 409}},
		{"g1 promoted", func() { e.promote(ctx, t, r1.Ref) }, codes{204, 409}},
		{"g2 promoted", func() { e.promote(ctx, t, r2.Ref) }, codes{409, 204}},
		{"g2 retiring", func() {
			if k := e.node.Retire(ctx, r2.Ref, time.Second); !k.Proven {
				t.Fatalf("retire g2: %v", k.Err())
			}
		}, codes{409, 0}},
	}
	for _, s := range steps {
		s.do()
		got := codes{G1: write(1)}
		if s.want.G2 != 0 {
			got.G2 = write(2)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: write status (-want,+got):\n%s", s.name, diff)
		}
	}
}

func (e *env) promote(ctx context.Context, t *testing.T, ref Ref) {
	t.Helper()
	if _, err := e.node.Promote(ctx, ref); err != nil {
		t.Fatal(err)
	}
}

// putSchedules stores a timer list through a control socket and returns
// the status.
func putSchedules(ctx context.Context, t *testing.T, sock, token string) int {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://localhost/v1/schedules", strings.NewReader(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("PUT via %s: %v", sock, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
