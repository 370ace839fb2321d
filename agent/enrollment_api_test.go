package agent

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/runtime/join"
)

// deadAddress is a loopback address nothing listens on: every request to
// it is refused, as when the API server is down.
func deadAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestEnrollmentBackoffSchedule: failed rounds in a row are retried 1, 2,
// 4, 8, 16, 30, 30 s apart.
func TestEnrollmentBackoffSchedule(t *testing.T) {
	rl := controllers.APIBackoff()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "node"}}
	var got []time.Duration
	for range 7 {
		got = append(got, rl.When(req))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits between failed rounds (-want,+got):\n%s", diff)
	}
}

// TestEnrollmentWithoutAPI: against an API server that refuses every
// connection, each round fails, the cause is logged once, and the mode
// stays unknown (never joining, never hosting).
func TestEnrollmentWithoutAPI(t *testing.T) {
	cfg := &rest.Config{Host: "http://" + deadAddress(t)}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1.GroupVersion.WithKind("Enrollment"), meta.RESTScopeRoot)
	c, err := client.New(cfg, client.Options{Scheme: scheme.New(), Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var errorLines []string
	log := funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"`) {
			logMu.Lock()
			errorLines = append(errorLines, args)
			logMu.Unlock()
		}
	}, funcr.Options{})
	base := t.TempDir()
	r := &controllers.EnrollmentReconciler{
		Client: c, NodeName: "node-backoff",
		Guard:        join.Guard{StateRoot: base, RunRoot: base, SocketGroup: "root", CgroupRoot: "unused"},
		Gate:         &hostgate.Switch{},
		StartHosting: func() error { t.Error("hosting started without the API"); return nil },
		Fatal:        func(err error) { t.Errorf("fatal: %v", err) },
		Clock:        clocktesting.NewFakeClock(time.Unix(1_000_000, 0)),
		Every:        joinEvery, PrepareEvery: prepareEvery, Log: log,
	}
	for range 3 {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err == nil {
			t.Fatal("a round without the API succeeded")
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], "connection refused") {
		t.Errorf("want the cause logged once, got %d lines: %q", len(errorLines), errorLines)
	}
	if d, known := r.Decision(); known || r.Gate.Accepting() {
		t.Errorf("unknown mode became %q (accepting %v): it must stay as it was", d.Stage, r.Gate.Accepting())
	}
}
