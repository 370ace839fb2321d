package agent

import (
	"context"
	"testing"
	"time"
)

type shutdownRecorder chan time.Time

func (r shutdownRecorder) Shutdown(ctx context.Context) {
	d, _ := ctx.Deadline()
	r <- d
}

// TestProofsBoundedOnStop: when the manager stops (SIGTERM), the node's
// proofs are bounded by the budget, not left to outlive the pod's grace.
func TestProofsBoundedOnStop(t *testing.T) {
	rec := make(shutdownRecorder, 1)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- shutdownOnStop(rec, 15*time.Second)(ctx) }()
	select {
	case <-rec:
		t.Fatal("proofs bounded before the manager stopped")
	case <-time.After(50 * time.Millisecond):
	}
	stopped := time.Now()
	stop()
	select {
	case deadline := <-rec:
		if left := deadline.Sub(stopped); left <= 0 || left > 16*time.Second {
			t.Errorf("proofs bounded %s after the stop, want within the 15s budget", left)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node's proofs were not bounded when the manager stopped")
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}
