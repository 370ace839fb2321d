package node

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/unitstest"
)

// TestListAfterRestart: a restarted agent lists what the node holds,
// adopts what runs (its end reaches Events) and not what is gone; a
// retired and forgotten slot is not listed, nor another Instance's by
// ListInstance.
func TestListAfterRestart(t *testing.T) {
	g := func(name string, n int64) Ref { return GenerationRef("default", name, n) }
	tests := map[string]struct {
		list      func(ctx context.Context, n *Node) ([]Ref, error)
		want      []Ref
		wantHeld  []Ref // adopted by the listing Node
		wantEvent Ref   // delivered once g2 of web exits after the restart
	}{
		"List": {
			list:      func(ctx context.Context, n *Node) ([]Ref, error) { return n.List(ctx) },
			want:      []Ref{g("other", 1), g("web", 2), g("web", 3)},
			wantHeld:  []Ref{g("other", 1), g("web", 2)},
			wantEvent: g("web", 2),
		},
		"ListInstance": {
			list: func(ctx context.Context, n *Node) ([]Ref, error) {
				return n.ListInstance(ctx, InstanceRef{Namespace: "default", Name: "web"})
			},
			want:      []Ref{g("web", 2), g("web", 3)},
			wantHeld:  []Ref{g("web", 2)},
			wantEvent: g("web", 2),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newFakeEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, ref := range []Ref{g("web", 1), g("web", 2), g("web", 3), g("other", 1)} {
				e.start(ctx, t, ref.Name, ref.Generation)
			}
			if k := e.node.Retire(ctx, g("web", 1), time.Second); !k.Proven {
				t.Fatal(k.Err())
			}
			if err := e.node.Forget(ctx, g("web", 1)); err != nil {
				t.Fatal(err)
			}
			if err := e.units.Exit(e.proc(t, g("web", 3)), outcome.Exit{Result: "exit-code", Code: 2}); err != nil {
				t.Fatal(err)
			}
			b := e.units.Restart()
			if err := e.node.Close(); err != nil {
				t.Fatal(err)
			}
			e.units, e.node = b, e.newNode(t, b)
			got, err := tc.list(ctx, e.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("listed (-want,+got):\n%s", diff)
			}
			var held []Ref
			for _, ref := range tc.want {
				if e.held(ref) {
					held = append(held, ref)
				}
			}
			if diff := cmp.Diff(tc.wantHeld, held); diff != "" {
				t.Errorf("adopted (-want,+got):\n%s", diff)
			}
			if err := e.units.Exit(e.proc(t, g("web", 2)), outcome.Exit{Result: "exit-code", Code: 1}); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-e.node.Events():
				if diff := cmp.Diff(tc.wantEvent, ev); diff != "" {
					t.Errorf("event (-want,+got):\n%s", diff)
				}
			case <-ctx.Done():
				t.Fatal("no event from the adopted slot's end")
			}
		})
	}
}

// runSeen is how a run ended and what it left.
type runSeen struct {
	Start   outcome.StartKind
	Code    *int // the run's own exit code, when it ended by itself
	Stopped bool
	Reason  outcome.KillReason // "" when proven
	Parent  cgroups.Tier       // the Instance's parent after the run
	Listed  []Ref              // the Instance's slots after the run
}

// TestRunBookkeeping: a run joins the parent as it is (the floor, or an
// overlap's raise), is proven gone and forgotten, or stays held and
// listed when its proof fails.
func TestRunBookkeeping(t *testing.T) {
	zero := 0
	run := Ref{InstanceRef: fakeGen1.InstanceRef, Role: "cmd", Command: "once"}
	tests := map[string]struct {
		fault   unitstest.Fault
		raise   bool          // an overlap's raise is in place
		timeout time.Duration // the caller goes away after it (0: stays)
		gen     int64         // the generation run against (0: 1)
		want    runSeen
	}{
		"ends by itself: parent kept at the floor": {
			fault: unitstest.Fault{Exit: &outcome.Exit{Result: "success"}},
			want:  runSeen{Start: outcome.Running, Code: &zero, Parent: fakeFloor, Listed: []Ref{fakeGen1}},
		},
		"during an overlap: the raise kept": {
			fault: unitstest.Fault{Exit: &outcome.Exit{Result: "success"}},
			raise: true,
			want:  runSeen{Start: outcome.Running, Code: &zero, Parent: fakeOverlap, Listed: []Ref{fakeGen1}},
		},
		"the caller goes away: stopped and proven": {
			timeout: 50 * time.Millisecond,
			want:    runSeen{Start: outcome.Running, Stopped: true, Parent: fakeFloor, Listed: []Ref{fakeGen1}},
		},
		"never seen empty: held and listed": {
			fault:   unitstest.Fault{Linger: true},
			timeout: 50 * time.Millisecond,
			want: runSeen{Start: outcome.Running, Stopped: true, Reason: outcome.CgroupNotEmpty, Parent: fakeFloor,
				Listed: []Ref{run, fakeGen1}},
		},
		"against a generation never started: refused": {
			gen:  2,
			want: runSeen{Start: outcome.NotStarted, Parent: fakeFloor, Listed: []Ref{fakeGen1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newFakeEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.start(ctx, t, fakeGen1.Name, 1)
			if tc.raise {
				if err := e.node.RaiseParent(ctx, fakeGen1.InstanceRef, fakeOverlap); err != nil {
					t.Fatal(err)
				}
			}
			e.units.Inject(e.proc(t, run), tc.fault)
			rctx := ctx
			if tc.timeout > 0 {
				var rcancel context.CancelFunc
				rctx, rcancel = context.WithTimeout(ctx, tc.timeout)
				defer rcancel()
			}
			gen := max(tc.gen, 1)
			res := e.node.Run(rctx, RunRequest{InstanceRef: fakeGen1.InstanceRef, Name: run.Command, Generation: gen,
				Argv: []string{"/bin/true"}, Stdout: io.Discard, Stderr: io.Discard, Grace: 100 * time.Millisecond})
			got := runSeen{Start: res.Start.Kind, Stopped: res.Stopped, Reason: res.Kill.Reason, Parent: e.limit(t, fakeGen1.Name)}
			if res.Exit != nil {
				got.Code = &res.Exit.Code
			}
			var err error
			if got.Listed, err = e.node.ListInstance(ctx, fakeGen1.InstanceRef); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
