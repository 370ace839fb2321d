package agent

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/runtime/join"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

// TestAPIBackoffSchedule runs the joining loop against an API server that
// refuses every connection, on a fake clock: the rounds come 1, 2, 4, 8,
// 16, 30, 30 s apart, and the cause is logged once.
func TestAPIBackoffSchedule(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	var mu sync.Mutex
	var rounds []time.Time
	cfg := &rest.Config{Host: "http://" + deadAddress(t), WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			rounds = append(rounds, fc.Now())
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(hostingv1alpha1.GroupVersion.WithKind("Enrollment"), meta.RESTScopeRoot)
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
	l := &enrollmentLoop{
		reporter:     &controllers.EnrollmentReporter{Client: c, NodeName: "node-backoff"},
		guard:        join.Guard{StateRoot: base, RunRoot: base, SocketGroup: "root", CgroupRoot: "unused"},
		clock:        fc,
		every:        joinEvery,
		prepareEvery: prepareEvery,
		gate:         &hostgate.Switch{},
		startHosting: func() error { t.Error("hosting started without the API"); return nil },
		log:          log,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start after cancel: %v", err)
		}
	})

	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(rounds) }
	for count() < len(want)+1 {
		// The loop is waiting once it has a timer on the clock; only then
		// may time move, so each round sees the time it was due.
		deadline := time.Now().Add(10 * time.Second)
		for !fc.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatalf("the loop is not waiting after %d rounds", count())
			}
			time.Sleep(time.Millisecond)
		}
		fc.Step(time.Second)
	}
	mu.Lock()
	var got []time.Duration
	for i := 1; i <= len(want); i++ {
		got = append(got, rounds[i].Sub(rounds[i-1]))
	}
	mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits between failed rounds (-want,+got):\n%s", diff)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], "connection refused") {
		t.Errorf("want the cause logged once, got %d lines: %q", len(errorLines), errorLines)
	}
	if d := l.decision(); l.gate.Accepting() || d.Stage != "" {
		t.Errorf("unknown mode became %q (accepting %v): it must stay as it was", d.Stage, l.gate.Accepting())
	}
}
