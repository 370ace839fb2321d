package units

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// waitForever is a proof that never finds the unit gone: it returns only
// when its context ends, with what it saw (a populated cgroup).
func waitForever(ctx context.Context) outcome.Kill {
	<-ctx.Done()
	return outcome.Unproven(outcome.CgroupNotEmpty, nil)
}

func TestProofBudgetAndShutdown(t *testing.T) {
	tests := map[string]struct {
		budget time.Duration
		// shutdown, when set, is called while the proof runs.
		shutdown func(p *proofs)
		// callerCancelled runs the proof on an already cancelled context.
		callerCancelled bool
		want            outcome.KillReason
	}{
		"budget ends an endless proof": {
			budget: 20 * time.Millisecond, want: outcome.ProofTimedOut,
		},
		"shutdown cancels a running proof at once": {
			budget: time.Hour,
			shutdown: func(p *proofs) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				p.shutdownWith(ctx)
			},
			want: outcome.Cancelled,
		},
		"shutdown budget ends a running proof": {
			budget: time.Hour,
			shutdown: func(p *proofs) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				t.Cleanup(cancel)
				p.shutdownWith(ctx)
			},
			want: outcome.Cancelled,
		},
		"a caller's cancellation does not cut the proof short": {
			budget: 30 * time.Millisecond, callerCancelled: true, want: outcome.ProofTimedOut,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newProofs(tc.budget)
			ctx := context.Background()
			if tc.callerCancelled {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			done := make(chan outcome.Kill, 1)
			go func() { done <- p.run(ctx, waitForever) }()
			if tc.shutdown != nil {
				waitRunning(t, p)
				tc.shutdown(p)
			}
			select {
			case k := <-done:
				if diff := cmp.Diff(tc.want, k.Reason); diff != "" {
					t.Errorf("reason (-want,+got):\n%s", diff)
				}
				if k.Proven {
					t.Errorf("a proof cut short came back Proven")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the proof was not cut short")
			}
		})
	}
}

func TestProofAfterShutdownRunsUnderIt(t *testing.T) {
	p := newProofs(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.shutdownWith(ctx)
	k := p.run(context.Background(), waitForever)
	if diff := cmp.Diff(outcome.Cancelled, k.Reason); diff != "" {
		t.Errorf("reason (-want,+got):\n%s", diff)
	}
}

func TestProvenProofIsKept(t *testing.T) {
	p := newProofs(time.Hour)
	k := p.run(context.Background(), func(context.Context) outcome.Kill { return outcome.ProvenKill() })
	if !k.Proven {
		t.Errorf("got %+v, want Proven", k)
	}
}

func waitRunning(t *testing.T, p *proofs) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		p.mu.Lock()
		n := len(p.cancels)
		p.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("proof never started")
}
