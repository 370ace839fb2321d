package units

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRefillAfter(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	type want struct {
		Spawn bool
		Wait  time.Duration
	}
	for name, tc := range map[string]struct {
		state poolState
		now   time.Time
		want  want
	}{
		"empty, quiet for exactly the period": {
			state: poolState{last: t0}, now: t0.Add(refillQuiet), want: want{Spawn: true},
		},
		"one idle, quiet for longer": {
			state: poolState{idle: 1, last: t0}, now: t0.Add(time.Minute), want: want{Spawn: true},
		},
		"empty, a start answered just now": {
			state: poolState{last: t0}, now: t0, want: want{Wait: refillQuiet},
		},
		"empty, quiet for part of the period": {
			state: poolState{last: t0}, now: t0.Add(refillQuiet - time.Millisecond), want: want{Wait: time.Millisecond},
		},
		"a start in flight, long after the last answer": {
			state: poolState{busy: 1, last: t0}, now: t0.Add(time.Minute), want: want{},
		},
		"full": {
			state: poolState{idle: warmShims, last: t0}, now: t0.Add(time.Minute), want: want{},
		},
		"closed": {
			state: poolState{closed: true, last: t0}, now: t0.Add(time.Minute), want: want{},
		},
		"drained, a start in flight, answered just now": {
			state: poolState{busy: 1, last: t0, drained: true}, now: t0, want: want{Spawn: true},
		},
		"drained, one idle": {
			state: poolState{idle: 1, last: t0, drained: true}, now: t0, want: want{Spawn: true},
		},
		"drained, full": {
			state: poolState{idle: warmShims, last: t0, drained: true}, now: t0, want: want{},
		},
		"drained, closed": {
			state: poolState{closed: true, last: t0, drained: true}, now: t0, want: want{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got want
			got.Spawn, got.Wait = refillAfter(tc.state, tc.now, refillQuiet)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refillAfter (-want,+got):\n%s", diff)
			}
		})
	}
}

// fakeClock runs its timers' funcs in Advance, in the caller's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock on by d and runs the timers then due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// poolCounts is what the pool has done so far; filling says a refill is
// spawning. With a fake clock every refill starts inside Advance, so
// filling false right after it means none started.
type poolCounts struct {
	Spawned, Idle int
	Filling       bool
}

func counts(b *Direct) poolCounts {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return poolCounts{Spawned: b.pool.spawned, Idle: len(b.pool.idle), Filling: b.pool.filling}
}

// A burst no longer than the pool spawns no refill shim, however long
// it lasts, until no start has come for refillQuiet. A start that finds
// the pool empty spawns its own shim at once (the clock stands still) and
// the pool then refills without waiting for quiet.
func TestDirectRefillWaitsForQuiet(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	clk := &fakeClock{now: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	b.pool.clock = clk
	gen := int64(0)
	start := func() {
		gen++
		startRunning(t, e, b, "quiet", gen)
	}
	// The first start found the pool empty.
	start()
	idlePids(t, b)
	if diff := cmp.Diff(poolCounts{Spawned: warmShims, Idle: warmShims}, waitFilled(t, b)); diff != "" {
		t.Fatalf("after the first start (-want,+got):\n%s", diff)
	}
	clk.Advance(refillQuiet)
	// A burst of warmShims starts, longer than the quiet period but
	// never quiet for it.
	for range warmShims {
		start()
		clk.Advance(refillQuiet - time.Nanosecond)
	}
	if diff := cmp.Diff(poolCounts{Spawned: warmShims}, counts(b)); diff != "" {
		t.Fatalf("after the burst (-want,+got):\n%s", diff)
	}
	clk.Advance(time.Nanosecond)
	idlePids(t, b)
	if diff := cmp.Diff(poolCounts{Spawned: 2 * warmShims, Idle: warmShims}, waitFilled(t, b)); diff != "" {
		t.Fatalf("once quiet (-want,+got):\n%s", diff)
	}
	clk.Advance(refillQuiet)
	// A burst one start longer than the pool: its last start spawns its
	// own shim, then the refill runs with no quiet period.
	for range warmShims + 1 {
		start()
	}
	// The clock stood still since the burst began: only the drained
	// pool can have started this refill.
	idlePids(t, b)
	if diff := cmp.Diff(poolCounts{Spawned: 3 * warmShims, Idle: warmShims}, waitFilled(t, b)); diff != "" {
		t.Fatalf("after the refill of a drained pool (-want,+got):\n%s", diff)
	}
}

// No refill after Close, not even one waiting for its quiet period.
func TestDirectCloseStopsQuietRefill(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	clk := &fakeClock{now: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	b.pool.clock = clk
	startRunning(t, e, b, "closequiet", 1)
	b.Close()
	clk.Advance(refillQuiet)
	if diff := cmp.Diff(poolCounts{}, counts(b)); diff != "" {
		t.Errorf("after Close and a quiet period (-want,+got):\n%s", diff)
	}
}

// waitFilled waits for the refill to end and returns the counts then.
func waitFilled(t *testing.T, b *Direct) poolCounts {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := counts(b)
		if !c.Filling {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("refill still running: %+v", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
