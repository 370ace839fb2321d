package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/node"
)

func TestProbeWait(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		handedOff bool
		since     time.Duration
		want      time.Duration
	}{
		"just started":                {handedOff: true, want: minProbeWait},
		"40 ms in":                    {handedOff: true, since: 40 * time.Millisecond, want: 20 * time.Millisecond},
		"2 s in":                      {handedOff: true, since: 2 * time.Second, want: 250 * time.Millisecond},
		"started before this process": {want: 250 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start.Add(tc.since))
			r := &GenerationReconciler{ProbeInterval: 250 * time.Millisecond, Clock: clk}
			uid := types.UID("g1")
			if tc.handedOff {
				r.handedOff.Store(uid, handoff{at: start})
			}
			if got := r.probeWait(uid); got != tc.want {
				t.Errorf("probeWait = %s, want %s", got, tc.want)
			}
		})
	}
}

// readyAfter answers a probe once it has been asked n times.
type readyAfter struct {
	*fakeRuntime
	n, asked int
}

func (r *readyAfter) Probe(context.Context, node.Ref, node.Readiness) error {
	r.asked++
	if r.asked < r.n {
		return errors.New("connection refused")
	}
	return nil
}

// TestProbeFresh: a generation this reconcile started is probed again
// within freshProbeBudget, so an app that binds its socket at once is
// Ready in the same status write as its start; a slower one is left to
// the requeued probes.
func TestProbeFresh(t *testing.T) {
	cases := map[string]struct {
		readyAt   int // the probe that answers, counting the reconcile's first
		wantReady bool
		wantAsked int
	}{
		"answers at the second probe":     {readyAt: 2, wantReady: true, wantAsked: 1},
		"answers at the last probe":       {readyAt: 5, wantReady: true, wantAsked: 4},
		"answers later: left to requeues": {readyAt: 6, wantAsked: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &readyAfter{fakeRuntime: newFakeRuntime(), n: tc.readyAt - 1}
			r := &GenerationReconciler{Runtime: rt}
			gen := &v1.Generation{Spec: v1.GenerationSpec{Instance: "i", Number: 1}}
			began := time.Now()
			err := r.probeFresh(context.Background(), gen)
			if (err == nil) != tc.wantReady || rt.asked != tc.wantAsked {
				t.Errorf("ready %v after %d probes, want %v after %d", err == nil, rt.asked, tc.wantReady, tc.wantAsked)
			}
			if took := time.Since(began); !tc.wantReady && took < freshProbeBudget {
				t.Errorf("gave up after %s, before the budget of %s", took, freshProbeBudget)
			}
		})
	}
}
