package node

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestStartIsIdempotent: a repeated Start of a running slot returns it
// as Running without preparing or starting it again, and a retired
// generation is never started again.
func TestStartIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("again", 1)
	e.retireAtEnd(t, r.Ref)
	first := e.node.Start(ctx, r)
	if first.Start.Kind != outcome.Running {
		t.Fatalf("first start: %v (%v)", first.Start.Kind, first.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)
	second := e.node.Start(ctx, r)
	if second.Start.Kind != outcome.Running || second.Start.MainPID != first.Start.MainPID {
		t.Fatalf("second start: %v pid %d, want Running pid %d", second.Start.Kind, second.Start.MainPID, first.Start.MainPID)
	}
	if len(second.Steps) != 0 {
		t.Errorf("second start prepared again: %+v", second.Steps)
	}
	// The first run's sockets were not replaced underneath it.
	waitReady(ctx, t, e.node, r.Ref)

	if k := e.node.Retire(ctx, r.Ref, time.Second); !k.Proven {
		t.Fatalf("retire: %v", k.Err())
	}
	third := e.node.Start(ctx, r)
	if third.Start.Kind == outcome.Running || len(third.Steps) != 0 {
		t.Errorf("a retired generation started again: %v steps %v", third.Start.Kind, third.Steps)
	}
	if st, err := e.node.Observe(ctx, r.Ref); err != nil || st.Populated {
		t.Errorf("after start of a retired generation: %+v %v, want empty", st, err)
	}
}

// TestStartOutcomes: what a start reports, and that a slot that ended
// is delivered on Events.
func TestStartOutcomes(t *testing.T) {
	tests := map[string]struct {
		command []string
		// want lists the kinds the first start may report: an app that
		// exits at once may be seen running first.
		want []outcome.StartKind
		// wantLater is what a repeated start reports once it has ended.
		wantLater outcome.StartKind
		wantExit  *outcome.Exit
	}{
		"an app that exits at once ends ExitedBeforeObserved": {
			command:   []string{"/bin/sh", "-c", "exit 7"},
			want:      []outcome.StartKind{outcome.Running, outcome.ExitedBeforeObserved},
			wantLater: outcome.ExitedBeforeObserved,
			wantExit:  &outcome.Exit{Result: "exit-code", Code: 7},
		},
		"a missing app binary ends ExitedBeforeObserved": {
			command:   []string{"/nonexistent/app"},
			want:      []outcome.StartKind{outcome.Running, outcome.ExitedBeforeObserved},
			wantLater: outcome.ExitedBeforeObserved,
			wantExit:  &outcome.Exit{Result: "exit-code", Code: 127, ExecFailed: "exec /nonexistent/app: no such file or directory"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := e.appRequest("short", 1)
			r.Command, r.Args = tc.command, nil
			e.retireAtEnd(t, r.Ref)
			got := e.node.Start(ctx, r)
			if !kindIn(got.Start.Kind, tc.want) {
				t.Fatalf("start: %v (%v), want one of %v", got.Start.Kind, got.Start.Cause, tc.want)
			}
			select {
			case ev := <-e.node.Events():
				if diff := cmp.Diff(r.Ref, ev); diff != "" {
					t.Errorf("event (-want,+got):\n%s", diff)
				}
			case <-ctx.Done():
				t.Fatal("no event once the slot ended")
			}
			later := e.node.Start(ctx, r)
			if diff := cmp.Diff(tc.wantLater.String(), later.Start.Kind.String()); diff != "" {
				t.Errorf("repeated start (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantExit, later.Start.Exit, cmpopts.IgnoreFields(outcome.Exit{}, "At")); diff != "" {
				t.Errorf("exit (-want,+got):\n%s", diff)
			}
			if !errors.Is(later.Start.Err(), outcome.ErrExitedBeforeObserved) {
				t.Errorf("error %v does not match ErrExitedBeforeObserved", later.Start.Err())
			}
			if st, err := e.node.Observe(ctx, r.Ref); err != nil || st.Populated {
				t.Errorf("observe: %+v %v, want an empty cgroup", st, err)
			}
		})
	}
}

func kindIn(k outcome.StartKind, ks []outcome.StartKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// TestNotStartedReleasesListeners: a start refused before anything ran
// closes what prepare bound, so the slot can be started again.
func TestNotStartedReleasesListeners(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("refused", 1)
	e.retireAtEnd(t, r.Ref)
	bad := r
	bad.Command = []string{"relative/app"} // the launch file refuses it
	got := e.node.Start(ctx, bad)
	if got.Start.Kind != outcome.NotStarted {
		t.Fatalf("start: %v (%v), want NotStarted", got.Start.Kind, got.Start.Cause)
	}
	p, err := e.node.procOf(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.LogSocket()); !os.IsNotExist(err) {
		t.Errorf("log socket %s left bound after NotStarted (%v)", p.LogSocket(), err)
	}
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("retry: %v (%v), want Running", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)
}
