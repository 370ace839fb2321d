package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/sockdiag"
)

// TestDrainHoldsTheStop: a superseded generation is retired only once the
// runtime proves its listener drained, and the Generation says how it
// ended. Only a drain the limit cut short is an Event on the Instance: a
// proven one and the proof of the stop are kept by the conditions.
func TestDrainHoldsTheStop(t *testing.T) {
	for name, tc := range map[string]struct {
		drains     []node.DrainState
		limit      *int32
		wantDrain  string
		wantReason string
	}{
		"proven after a connection closes": {
			drains: []node.DrainState{
				{Needed: true, State: sockdiag.State{Listening: true, Open: 1}},
				{Needed: true, State: sockdiag.State{Listening: true, Queued: 2, Open: 1}},
				{Needed: true, State: sockdiag.State{Listening: true}, Proven: true},
			},
			wantDrain: "True/DrainProven",
		},
		"limit when a connection stays open": {
			drains:    []node.DrainState{{Needed: true, State: sockdiag.State{Listening: true, Open: 1}}},
			limit:     ptr.To[int32](1),
			wantDrain: "False/DrainLimit", wantReason: v1.ReasonDrainLimit,
		},
		"gone before the look": {
			drains:    []node.DrainState{{Needed: true, State: sockdiag.State{Listening: true, Open: 1}}, {}},
			wantDrain: "True/DrainProven",
		},
	} {
		t.Run(name, func(t *testing.T) {
			inst := "drain-" + strings.ReplaceAll(strings.SplitN(name, " ", 2)[0], " ", "")
			fake.mu.Lock()
			fake.drains[ref(inst, 1)] = tc.drains
			fake.mu.Unlock()
			create(t, instance(inst, func(i *v1.Instance) { i.Spec.DrainLimitSeconds = tc.limit }))
			waitInstance(t, inst, v1.ConditionReady, "True/Reconciled")
			updateInstance(t, inst, func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
			testutil.Eventually(t, "generation 1 drained and proven gone", waitLimit, pollEvery, func() (bool, string) {
				g := getGeneration(t, inst, 1)
				return terminated(g) && condition(g.Status.Conditions, v1.ConditionDrained) == tc.wantDrain, conditionsOf(g.Status.Conditions)
			})
			if tc.wantReason == "" {
				// Proven: the conditions say it; nothing is an Event.
				if seen := drainEvents(t, inst); seen != "" {
					t.Errorf("events on the Instance: %s; want none", seen)
				}
				return
			}
			testutil.Eventually(t, "the drain's Event on the Instance", waitLimit, pollEvery, func() (bool, string) {
				seen := drainEvents(t, inst)
				return strings.Contains(seen, tc.wantReason+": "), seen
			})
		})
	}
}

// drainEvents are the Events on Instance inst related to its generation
// 1, as "reason: note; ...".
func drainEvents(t *testing.T, inst string) string {
	t.Helper()
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Instance" && e.Regarding.Name == inst && e.Related != nil && e.Related.Name == generationName(inst, 1) {
			seen = append(seen, e.Reason+": "+e.Note)
		}
	}
	return strings.Join(seen, "; ")
}

// TestDrainWait grows from 20 ms to a second.
func TestDrainWait(t *testing.T) {
	for spent, want := range map[time.Duration]time.Duration{
		0: 20 * time.Millisecond, 40 * time.Millisecond: 20 * time.Millisecond,
		time.Second: 250 * time.Millisecond, time.Minute: time.Second,
	} {
		if got := drainWait(spent); got != want {
			t.Errorf("drainWait(%s) = %s, want %s", spent, got, want)
		}
	}
}
