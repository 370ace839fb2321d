package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/unitstest"
)

// overlapOp is one thing a swap (or the agent) does to an Instance.
type overlapOp string

const (
	opStart     overlapOp = "start"      // start generation Gen at fakeFloor
	opFailStart overlapOp = "fail-start" // a start of Gen the backend refuses
	opRaise     overlapOp = "raise"      // RaiseParent to fakeOverlap
	opRestore   overlapOp = "restore"    // RestoreParent to fakeFloor
	opRetire    overlapOp = "retire"     // retire generation Gen, proven
	opExit      overlapOp = "exit"       // generation Gen's app exits by itself
	opRestart   overlapOp = "restart"    // an agent restart
)

// overlapStep is a step and what is seen after it: the parent's limit,
// and the step's error ("" none, "populated": *cgroups.PopulatedError,
// "absent": cgroups.ErrParentAbsent).
type overlapStep struct {
	Do    overlapOp
	Gen   int64
	Limit cgroups.Tier
	Err   string
}

// TestOverlapLimits: the parent is raised for an overlap, kept raised
// while two generations run (whichever agent asks), and restored to the
// floor once one runs; an agent restarted mid-overlap reads the raise
// back from the parent, not from its memory.
func TestOverlapLimits(t *testing.T) {
	floor, overlap := fakeFloor, fakeOverlap
	tests := map[string]struct {
		steps []overlapStep
	}{
		"restore waits for the old generation to go": {steps: []overlapStep{
			{Do: opStart, Gen: 1, Limit: floor},
			{Do: opRaise, Limit: overlap},
			{Do: opStart, Gen: 2, Limit: overlap},
			{Do: opRestore, Limit: overlap, Err: "populated"},
			{Do: opRetire, Gen: 1, Limit: overlap},
			{Do: opRestore, Limit: floor},
		}},
		"a restart mid-overlap reads the raise back": {steps: []overlapStep{
			{Do: opStart, Gen: 1, Limit: floor},
			{Do: opRaise, Limit: overlap},
			{Do: opRestart, Limit: overlap},
			// The new agent's start asks for the floor: two generations
			// would run under it, so the raise is kept.
			{Do: opStart, Gen: 2, Limit: overlap},
			{Do: opRestore, Limit: overlap, Err: "populated"},
			{Do: opRetire, Gen: 1, Limit: overlap},
			{Do: opRestore, Limit: floor},
		}},
		"a restart after the successor started": {steps: []overlapStep{
			{Do: opStart, Gen: 1, Limit: floor},
			{Do: opRaise, Limit: overlap},
			{Do: opStart, Gen: 2, Limit: overlap},
			{Do: opRestart, Limit: overlap},
			{Do: opRestore, Limit: overlap, Err: "populated"},
			{Do: opExit, Gen: 1, Limit: overlap},
			{Do: opRestore, Limit: floor},
		}},
		"a successor that never started: restored at once": {steps: []overlapStep{
			{Do: opStart, Gen: 1, Limit: floor},
			{Do: opRaise, Limit: overlap},
			{Do: opFailStart, Gen: 2, Limit: overlap},
			{Do: opRestore, Limit: floor},
		}},
		"a settled Instance's restore, before and after a restart": {steps: []overlapStep{
			{Do: opStart, Gen: 1, Limit: floor},
			{Do: opRestore, Limit: floor},
			{Do: opRestart, Limit: floor},
			{Do: opRestore, Limit: floor},
		}},
		"no raise before the parent is there": {steps: []overlapStep{
			{Do: opRaise, Err: "absent"},
			{Do: opRestore, Err: "absent"},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newFakeEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []overlapStep
			for _, s := range tc.steps {
				err := e.overlapStep(ctx, t, "swap", s)
				seen := overlapStep{Do: s.Do, Gen: s.Gen, Limit: e.limit(t, "swap"), Err: errKind(err)}
				if seen.Err == "other" {
					t.Errorf("%s %d: %v", s.Do, s.Gen, err)
				}
				got = append(got, seen)
			}
			if diff := cmp.Diff(tc.steps, got); diff != "" {
				t.Errorf("steps (-want,+got):\n%s", diff)
			}
		})
	}
}

// overlapStep does s to Instance name; only a raise and a restore
// return their error, every other step must do what it says.
func (e *fakeEnv) overlapStep(ctx context.Context, t *testing.T, name string, s overlapStep) error {
	t.Helper()
	inst := InstanceRef{Namespace: "default", Name: name}
	ref := GenerationRef("default", name, s.Gen)
	switch s.Do {
	case opStart:
		e.start(ctx, t, name, s.Gen)
	case opFailStart:
		e.units.Inject(e.proc(t, ref), unitstest.Fault{Start: &outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("refused")}})
		if res := e.node.Start(ctx, e.request(name, s.Gen)); res.Start.Kind != outcome.NotStarted {
			t.Fatalf("start with a refusal: %v", res.Start.Kind)
		}
	case opRaise:
		return e.node.RaiseParent(ctx, inst, fakeOverlap)
	case opRestore:
		return e.node.RestoreParent(ctx, inst, fakeFloor)
	case opRetire:
		if k := e.node.Retire(ctx, ref, time.Second); !k.Proven {
			t.Fatalf("retire g%d: %v", s.Gen, k.Err())
		}
	case opExit:
		if err := e.units.Exit(e.proc(t, ref), outcome.Exit{Result: "success"}); err != nil {
			t.Fatal(err)
		}
	case opRestart:
		e.restart(ctx, t)
	}
	return nil
}

func errKind(err error) string {
	var pe *cgroups.PopulatedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pe):
		return "populated"
	case errors.Is(err, cgroups.ErrParentAbsent):
		return "absent"
	}
	return "other"
}
