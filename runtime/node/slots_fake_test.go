package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/unitstest"
)

// startSeen is what a test reads back after starts of generation 1.
type startSeen struct {
	Kinds  []outcome.StartKind // each start's outcome, in order
	Starts int                 // starts the backend was handed
	Held   bool                // the Node holds the slot
}

// TestStartBookkeeping: a slot is handed to the backend once, whatever
// the answer and however often a reconcile asks (an agent restart
// between included); a start the backend refused is not held, and may be
// tried again.
func TestStartBookkeeping(t *testing.T) {
	refused := &outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("refused")}
	lost := &outcome.Start{Kind: outcome.MayHaveRun, Cause: errors.New("answer lost")}
	tests := map[string]struct {
		fault   unitstest.Fault
		between func(ctx context.Context, t *testing.T, e *fakeEnv) // between the two starts
		want    startSeen
	}{
		"a reconcile asks twice": {
			want: startSeen{Kinds: []outcome.StartKind{outcome.Running, outcome.Running}, Starts: 1, Held: true},
		},
		"refused: nothing held, the next start runs it": {
			fault: unitstest.Fault{Start: refused},
			between: func(_ context.Context, t *testing.T, e *fakeEnv) {
				e.units.Inject(e.proc(t, fakeGen1), unitstest.Fault{})
			},
			want: startSeen{Kinds: []outcome.StartKind{outcome.NotStarted, outcome.Running}, Starts: 1, Held: true},
		},
		"answer lost: held, and never handed a second time": {
			fault: unitstest.Fault{Start: lost},
			want:  startSeen{Kinds: []outcome.StartKind{outcome.MayHaveRun, outcome.Running}, Starts: 1, Held: true},
		},
		"unobservable: not started, since a blind start could run it twice": {
			fault: unitstest.Fault{Observe: errors.New("manager away")},
			want:  startSeen{Kinds: []outcome.StartKind{outcome.NotStarted, outcome.NotStarted}},
		},
		"a generation that exited is not started again": {
			between: func(_ context.Context, t *testing.T, e *fakeEnv) {
				if err := e.units.Exit(e.proc(t, fakeGen1), outcome.Exit{Result: "exit-code", Code: 1}); err != nil {
					t.Fatal(err)
				}
			},
			want: startSeen{Kinds: []outcome.StartKind{outcome.Running, outcome.ExitedBeforeObserved}, Starts: 1, Held: true},
		},
		"exited, then an agent restart: not started again": {
			between: func(ctx context.Context, t *testing.T, e *fakeEnv) {
				if err := e.units.Exit(e.proc(t, fakeGen1), outcome.Exit{Result: "exit-code", Code: 1}); err != nil {
					t.Fatal(err)
				}
				e.restart(ctx, t) // the new Node holds nothing of it
			},
			want: startSeen{Kinds: []outcome.StartKind{outcome.Running, outcome.ExitedBeforeObserved}, Starts: 1},
		},
		"an agent restart adopts it": {
			between: func(ctx context.Context, t *testing.T, e *fakeEnv) { e.restart(ctx, t) },
			want:    startSeen{Kinds: []outcome.StartKind{outcome.Running, outcome.Running}, Starts: 1, Held: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newFakeEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.units.Inject(e.proc(t, fakeGen1), tc.fault)
			var got startSeen
			for i := range 2 {
				if i == 1 && tc.between != nil {
					tc.between(ctx, t, e)
				}
				got.Kinds = append(got.Kinds, e.node.Start(ctx, e.request(fakeGen1.Name, 1)).Start.Kind)
			}
			got.Starts, got.Held = e.units.Starts(e.proc(t, fakeGen1)), e.held(fakeGen1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// fakeGen1 is the generation most tests on the fake start.
var fakeGen1 = GenerationRef("default", "web", 1)

// held says whether the Node holds ref's slot.
func (e *fakeEnv) held(ref Ref) bool {
	e.node.mu.Lock()
	defer e.node.mu.Unlock()
	in, ok := e.node.instances[ref.InstanceRef]
	if !ok {
		return false
	}
	_, ok = in.slots[ref]
	return ok
}

// retireSeen is what a retire and a forget after it leave.
type retireSeen struct {
	Reason outcome.KillReason // "" when proven
	Held   bool               // the Node still holds the slot
	Forget string             // "", "held": ErrHeld, or the error
	Listed []Ref              // what List returns after
}

// TestRetireAndForget: only a proven retire lets go of the slot, and
// only a slot let go of is forgotten; a stop that hangs is bounded, the
// proof deciding.
func TestRetireAndForget(t *testing.T) {
	tests := map[string]struct {
		fault unitstest.Fault
		exit  bool // the app exits by itself first
		want  retireSeen
	}{
		"proven": {
			want: retireSeen{},
		},
		"exited by itself first": {
			exit: true,
			want: retireSeen{},
		},
		"the stop hangs: killed after the grace, proven": {
			fault: unitstest.Fault{Hang: true},
			want:  retireSeen{},
		},
		"never seen empty: held, refused, still listed": {
			fault: unitstest.Fault{Linger: true},
			want:  retireSeen{Reason: outcome.CgroupNotEmpty, Held: true, Forget: "held", Listed: []Ref{fakeGen1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newFakeEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.start(ctx, t, fakeGen1.Name, 1)
			p := e.proc(t, fakeGen1)
			e.units.Inject(p, tc.fault)
			if tc.exit {
				if err := e.units.Exit(p, outcome.Exit{Result: "success"}); err != nil {
					t.Fatal(err)
				}
			}
			// A reconciler's context never ends: the retire bounds itself.
			k := e.node.Retire(context.Background(), fakeGen1, 100*time.Millisecond)
			got := retireSeen{Reason: k.Reason, Held: e.held(fakeGen1)}
			switch err := e.node.Forget(ctx, fakeGen1); {
			case errors.Is(err, ErrHeld):
				got.Forget = "held"
			case err != nil:
				got.Forget = err.Error()
			}
			var err error
			if got.Listed, err = e.node.List(ctx); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// TestUnprovenRetireAgain: a slot an unproven retire kept is proven and
// let go of by the next retire once its last process is gone.
func TestUnprovenRetireAgain(t *testing.T) {
	e := newFakeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.start(ctx, t, fakeGen1.Name, 1)
	p := e.proc(t, fakeGen1)
	e.units.Inject(p, unitstest.Fault{Linger: true})
	if k := e.node.Retire(ctx, fakeGen1, time.Second); k.Proven {
		t.Fatal("a retire of a cgroup never seen empty was proven")
	}
	e.units.Release(p)
	if k := e.node.Retire(ctx, fakeGen1, time.Second); !k.Proven || e.held(fakeGen1) {
		t.Errorf("retire after the last process went: %v, held %v", k.Err(), e.held(fakeGen1))
	}
	if err := e.node.Forget(ctx, fakeGen1); err != nil {
		t.Errorf("forget: %v", err)
	}
}
