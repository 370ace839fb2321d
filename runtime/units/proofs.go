package units

import (
	"context"
	"sync"
	"time"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// proofs runs proofs under a budget of their own and ties them to the
// backend's shutdown: once Shutdown is called, a new proof runs under the
// shutdown context, and every proof still running when that context ends
// is cancelled. A cancelled proof is Unproven (Cancelled / ProofTimedOut),
// never Proven. A start's answer, once the start is sent, is awaited the
// same way (detach): past its caller's cancellation, until the shutdown's
// budget ends.
type proofs struct {
	budget time.Duration

	mu       sync.Mutex
	shutdown context.Context
	cancels  map[*byte]context.CancelFunc
}

func newProofs(budget time.Duration) *proofs {
	return &proofs{budget: budget, cancels: map[*byte]context.CancelFunc{}}
}

// run runs prove on a context of its own: the caller's values but not its
// cancellation (a cancelled request is often why a proof is needed), the
// budget, and the shutdown once it has begun.
func (p *proofs) run(ctx context.Context, prove func(context.Context) outcome.Kill) outcome.Kill {
	pctx, done := p.detach(ctx, p.budget)
	defer done()
	k := prove(pctx)
	if k.Proven {
		return k
	}
	// A proof that failed because its context ended says so.
	if err := pctx.Err(); err != nil && k.Reason != outcome.Cancelled && k.Reason != outcome.ProofTimedOut {
		cause := k.Cause
		if cause == nil {
			cause = err
		}
		return outcome.Unproven(outcome.ReasonFor(err), cause)
	}
	return k
}

// detach is a context with ctx's values but not its cancellation, ended
// by the shutdown once it has begun, and by budget or, when budget is 0,
// by ctx's deadline (a caller's bound on a wait, not a stop); done
// releases it.
func (p *proofs) detach(ctx context.Context, budget time.Duration) (context.Context, func()) {
	deadline, ok := ctx.Deadline()
	if budget > 0 {
		deadline, ok = time.Now().Add(budget), true
	}
	parent := context.WithoutCancel(ctx)
	dctx, cancel := context.WithCancel(parent)
	if ok {
		cancel()
		dctx, cancel = context.WithDeadline(parent, deadline)
	}
	token := new(byte)
	p.mu.Lock()
	var stop func() bool
	if p.shutdown != nil {
		stop = context.AfterFunc(p.shutdown, cancel)
	}
	p.cancels[token] = cancel
	p.mu.Unlock()
	return dctx, func() {
		p.mu.Lock()
		delete(p.cancels, token)
		p.mu.Unlock()
		cancel()
		if stop != nil {
			stop()
		}
	}
}

// shutdownWith binds every running and future proof to ctx.
func (p *proofs) shutdownWith(ctx context.Context) {
	p.mu.Lock()
	p.shutdown = ctx
	running := make([]context.CancelFunc, 0, len(p.cancels))
	for _, c := range p.cancels {
		running = append(running, c)
	}
	p.mu.Unlock()
	context.AfterFunc(ctx, func() {
		for _, c := range running {
			c()
		}
	})
}
