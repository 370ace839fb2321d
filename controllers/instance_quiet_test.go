package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// TestQuietSwap: a swap's start goes unwritten only while the unwritten
// status already reads as progressing (the edit not yet observed), the
// old generation serves, settled, and the new one says nothing yet, for
// swapQuietMax at most; anything uncertain or unproven is written at once.
func TestQuietSwap(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 10, 0, time.UTC)
	settled := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled}}
	swapping := append([]metav1.Condition{{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonSwapping}}, settled...)
	cases := map[string]struct {
		observed   int64
		conditions []metav1.Condition
		active     gb
		others     []gb
		targetAge  time.Duration
		target     gb
		want       time.Duration
	}{
		"an edit not yet observed, the old one serving": {observed: 1, conditions: settled, active: generation(1, "a").ready(), targetAge: time.Minute, want: swapQuietMax - time.Minute},
		"the new one started, not ready":                {observed: 1, conditions: settled, active: generation(1, "a").ready(), target: generation(2, "b").running()},
		"the new one failed":                            {observed: 1, conditions: settled, active: generation(1, "a").ready(), target: generation(2, "b").refused()},
		"the quiet is over":                             {observed: 1, conditions: settled, active: generation(1, "a").ready(), targetAge: swapQuietMax},
		"the edit is observed already":                  {observed: 2, conditions: settled, active: generation(1, "a").ready()},
		"a swap under way before the edit":              {observed: 1, conditions: swapping, active: generation(1, "a").ready()},
		"the old one is not ready":                      {observed: 1, conditions: settled, active: generation(1, "a").running()},
		"an uncertain start":                            {observed: 1, conditions: settled, active: generation(1, "a").ready(), others: []gb{generation(0, "z").cond(v1.ConditionStarted, metav1.ConditionUnknown)}},
		"an unproven kill":                              {observed: 1, conditions: settled, active: generation(1, "a").ready(), others: []gb{generation(0, "z").cond(v1.ConditionTerminated, metav1.ConditionFalse)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("quiet")
			inst.Generation = 2
			inst.Status.ObservedGeneration, inst.Status.ActiveGeneration, inst.Status.Conditions = tc.observed, 1, tc.conditions
			target := generation(2, "b").g
			if tc.target.g != nil {
				target = tc.target.g
			}
			target.CreationTimestamp = metav1.NewTime(now.Add(-tc.targetAge))
			gens := []*v1.Generation{}
			for _, o := range tc.others {
				gens = append(gens, o.g)
			}
			gens = append(gens, tc.active.g, target)
			s := &instanceScope{r: &InstanceReconciler{Clock: clocktesting.NewFakePassiveClock(now)}, inst: inst, gens: gens, patchBase: inst.DeepCopy()}
			if got := s.quietSwap(target); got != tc.want {
				t.Errorf("quietSwap = %s, want %s", got, tc.want)
			}
		})
	}
}
