package node

import (
	"context"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// BenchmarkStartToReady measures one generation from Start (prepare,
// launch file, cgroup, shim, trampoline, exec) until its app answers an
// HTTP probe on its own socket. The retire after each is not timed.
func BenchmarkStartToReady(b *testing.B) {
	e := newEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var n int64
	var startTook, prepTook time.Duration
	for b.Loop() {
		n++
		r := e.appRequest("bench", n)
		t0 := time.Now()
		got := e.node.Start(ctx, r)
		startTook += time.Since(t0)
		for _, s := range got.Steps {
			prepTook += s.Duration
		}
		if got.Start.Kind != outcome.Running {
			b.Fatalf("start %d: %v (%v)", n, got.Start.Kind, got.Start.Cause)
		}
		waitReady(ctx, b, e.node, r.Ref)
		b.StopTimer()
		if k := e.node.Retire(ctx, r.Ref, time.Second); !k.Proven {
			b.Fatalf("retire %d: %v", n, k.Err())
		}
		b.StartTimer()
	}
	// Where the time goes: Start itself (prepare included) and prepare.
	b.ReportMetric(float64(startTook.Microseconds())/float64(n), "start-µs/op")
	b.ReportMetric(float64(prepTook.Microseconds())/float64(n), "prepare-µs/op")
}
