package units

import (
	"time"
)

// refillQuiet is how long no start may have been handed off or answered
// before the pool refills: a refill shim is a Go process starting on the
// node's cores, and during a burst it slows the next start (issue 32
// part 5, docs/reports/benchmarks.md). Well below the gap between starts
// applied one by one, well above the gap between the starts of one burst.
//
// A burst longer than the pool is the exception: once a start found the
// pool empty, the pool refills at once until starts are quiet again, since
// a start spawning its own shim pays the shim's start-up itself, which
// costs it more than a shim starting beside it.
const refillQuiet = 50 * time.Millisecond

// clock is time for the refill's quiet period; tests fake it.
type clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d; the func it
	// returns stops that, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// poolState is what the refill decision reads.
type poolState struct {
	closed bool
	idle   int       // shims waiting for a job
	busy   int       // starts handed off and not yet answered
	last   time.Time // the last hand-off or answer
	// drained: a start of this burst found the pool empty.
	drained bool
}

// refillAfter decides whether to spawn a shim for the pool now (spawn),
// or after wait (wait > 0: look again then), or not until a start ends
// (neither: full, closed, or a start in flight, whose answer looks again).
func refillAfter(s poolState, now time.Time, quiet time.Duration) (spawn bool, wait time.Duration) {
	switch {
	case s.closed || s.idle >= warmShims:
		return false, 0
	case s.drained:
		return true, 0
	case s.busy > 0:
		return false, 0
	}
	if quiet := s.last.Add(quiet).Sub(now); quiet > 0 {
		return false, quiet
	}
	return true, 0
}

func (p *shimPool) clk() clock {
	if p.clock == nil {
		return realClock{}
	}
	return p.clock
}

// begin notes a start about to be handed off: no refill spawns until it
// is answered and a quiet period has passed, unless the burst drained
// the pool. A start after a quiet period begins a new burst.
func (p *shimPool) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clk().Now()
	if p.busy == 0 && now.Sub(p.last) >= refillQuiet {
		p.drained = false
	}
	p.busy++
	p.last = now
}

// answered ends what begin started and looks at the pool again once the
// quiet period has passed; it spawns nothing itself.
func (b *Direct) answered() {
	p := &b.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy--
	p.last = p.clk().Now()
	b.lookLocked()
}

func (p *shimPool) state() poolState {
	return poolState{closed: p.closed, idle: len(p.idle), busy: p.busy, last: p.last, drained: p.drained}
}

// lookLocked starts the refill when it is due, or arms one timer for when
// it may be. A running refill looks again before each shim itself.
func (b *Direct) lookLocked() {
	p := &b.pool
	if p.filling {
		return
	}
	spawn, wait := refillAfter(p.state(), p.clk().Now(), refillQuiet)
	switch {
	case spawn:
		// A drained pool does not wait for the quiet a timer was armed for.
		if p.timer != nil {
			p.timer()
			p.timer = nil
		}
		p.filling = true
		p.fills.Add(1)
		go b.fill()
	case wait > 0 && p.timer == nil:
		p.timerGen++
		gen := p.timerGen
		p.timer = p.clk().AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			// Stopped, or replaced, after it fired: a stale look.
			if p.timer == nil || p.timerGen != gen {
				return
			}
			p.timer = nil
			b.lookLocked()
		})
	}
}

// fill spawns shims one at a time while the refill stays due: a start
// handed off meanwhile stops it after the shim being spawned, and its
// answer looks again.
func (b *Direct) fill() {
	p := &b.pool
	defer p.fills.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if spawn, _ := refillAfter(p.state(), p.clk().Now(), refillQuiet); !spawn {
			p.filling = false
			b.lookLocked() // a quiet period begun during the spawn
			return
		}
		p.mu.Unlock()
		s, err := b.spawnShim(true)
		p.mu.Lock()
		switch {
		case err != nil:
			p.filling = false
			b.cfg.Log.Info("warm shim not started", "err", err)
			return
		case p.closed:
			p.filling = false
			p.mu.Unlock()
			s.dismiss() // waits for the shim: not under the lock
			p.mu.Lock()
			return
		}
		p.spawned++
		p.idle = append(p.idle, s)
	}
}
