package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// genWith builds a Generation n with conditions for the status setters'
// tests; reason and message are the test's.
func genWith(n int64, conds ...metav1.Condition) *v1.Generation {
	return &v1.Generation{Spec: v1.GenerationSpec{Number: n}, Status: v1.GenerationStatus{Conditions: conds}}
}

// cond is a condition with a reason and a message.
func cond(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
}

// observedCond is want's condition as a setter writes it at generation 4.
func observedCond(typ string, st metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	c := cond(typ, st, reason, msg)
	c.ObservedGeneration = 4
	return &c
}

// conditionOf is typ's condition of inst without its transition time
// (the setters take it from the clock); nil when absent.
func conditionOf(inst *v1.Instance, typ string) *metav1.Condition {
	for _, c := range inst.Status.Conditions {
		if c.Type == typ {
			c.LastTransitionTime = metav1.Time{}
			return &c
		}
	}
	return nil
}

// instanceWith is an Instance whose status has the given conditions.
func instanceWith(conds ...metav1.Condition) *v1.Instance {
	return &v1.Instance{Status: v1.InstanceStatus{Conditions: conds}}
}

var (
	mayHaveRun     = genWith(2, cond(v1.ConditionStarted, metav1.ConditionUnknown, "MayHaveRun", "the answer was lost"))
	killNotProven  = genWith(1, cond(v1.ConditionTerminated, metav1.ConditionFalse, v1.ReasonCgroupNotEmpty, "3 pids"))
	servingReady   = genWith(5, cond(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRunning, ""), cond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonProbeSucceeded, ""))
	servingProbing = genWith(5, cond(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonRunning, ""), cond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonProbing, "refused"))
	wokenAt        = &metav1.Time{Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
)

// instanceSetterCase is one row of a status setter's table.
type instanceSetterCase struct {
	inst  *v1.Instance // nil: an Instance with no condition
	facts instanceFacts
	want  *metav1.Condition // nil: the condition is absent
}

func runInstanceSetter(t *testing.T, typ string, set func(*v1.Instance, instanceFacts), tests map[string]instanceSetterCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := tc.inst
			if inst == nil {
				inst = instanceWith()
			}
			tc.facts.observed = 4
			set(inst, tc.facts)
			if diff := cmp.Diff(tc.want, conditionOf(inst, typ)); diff != "" {
				t.Errorf("%s (-want,+got):\n%s", typ, diff)
			}
		})
	}
}

func TestSetStartUncertain(t *testing.T) {
	runInstanceSetter(t, v1.ConditionStartUncertain, setStartUncertain, map[string]instanceSetterCase{
		"every start known": {
			want: observedCond(v1.ConditionStartUncertain, metav1.ConditionFalse, v1.ReasonCertain, "every start's outcome is known"),
		},
		"a start that may have run": {
			facts: instanceFacts{uncertain: mayHaveRun},
			want:  observedCond(v1.ConditionStartUncertain, metav1.ConditionTrue, "MayHaveRun", "generation 2 may have run: the answer was lost"),
		},
	})
}

func TestSetKillUnproven(t *testing.T) {
	runInstanceSetter(t, v1.ConditionKillUnproven, setKillUnproven, map[string]instanceSetterCase{
		"every kill proven": {
			want: observedCond(v1.ConditionKillUnproven, metav1.ConditionFalse, v1.ReasonProven, "no kill is left unproven"),
		},
		"a generation's kill not proven": {
			facts: instanceFacts{unproven: killNotProven},
			want:  observedCond(v1.ConditionKillUnproven, metav1.ConditionTrue, v1.ReasonCgroupNotEmpty, "generation 1: 3 pids"),
		},
		"a role's kill not proven": {
			facts: instanceFacts{note: note{unproven: true, reason: "SeedKillUnproven", msg: "the seed lives"}},
			want:  observedCond(v1.ConditionKillUnproven, metav1.ConditionTrue, "SeedKillUnproven", "the seed lives"),
		},
		"a generation's says it before a role's": {
			facts: instanceFacts{unproven: killNotProven, note: note{unproven: true, reason: "SeedKillUnproven", msg: "the seed lives"}},
			want:  observedCond(v1.ConditionKillUnproven, metav1.ConditionTrue, v1.ReasonCgroupNotEmpty, "generation 1: 3 pids"),
		},
	})
}

func TestSetStalled(t *testing.T) {
	runInstanceSetter(t, v1.ConditionStalled, setStalled, map[string]instanceSetterCase{
		"progressing: absent": {
			facts: instanceFacts{note: note{reason: v1.ReasonSwapping, reconciling: true}},
		},
		"no longer stalled: removed": {
			inst: instanceWith(cond(v1.ConditionStalled, metav1.ConditionTrue, v1.ReasonSwapAborted, "g2 failed")),
		},
		"a swap aborted": {
			facts: instanceFacts{note: note{reason: v1.ReasonSwapAborted, msg: "g2 failed", stalled: true}},
			want:  observedCond(v1.ConditionStalled, metav1.ConditionTrue, v1.ReasonSwapAborted, "g2 failed"),
		},
	})
}

func TestSetReconciling(t *testing.T) {
	runInstanceSetter(t, v1.ConditionReconciling, setReconciling, map[string]instanceSetterCase{
		"serving, nothing under way: absent": {
			inst:  instanceWith(cond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonSwapping, "")),
			facts: instanceFacts{active: servingReady},
		},
		"a swap under way": {
			facts: instanceFacts{active: servingReady, note: note{reason: v1.ReasonSwapping, msg: "waiting for generation 6", reconciling: true}},
			want:  observedCond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonSwapping, "waiting for generation 6"),
		},
		"nothing serves and nothing noted": {
			want: observedCond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonProgressing, "waiting for a generation to serve"),
		},
		"woken: says so first": {
			facts: instanceFacts{wokenAt: wokenAt},
			want: observedCond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonWaking,
				"woken by a connection at 2026-11-30T12:00:00Z: waiting for a generation to serve"),
		},
		"suspended, nothing under way: absent": {facts: instanceFacts{suspend: true}},
		"stalled with nothing serving: absent": {facts: instanceFacts{note: note{reason: v1.ReasonSwapAborted, stalled: true}}},
		"asleep: absent":                       {facts: instanceFacts{idle: true}},
		"asleep, still retiring": {
			facts: instanceFacts{idle: true, note: note{reason: v1.ReasonIdle, msg: "idle: waiting", reconciling: true}},
			want:  observedCond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonIdle, "idle: waiting"),
		},
	})
}

func TestSetInstanceReady(t *testing.T) {
	swapping := note{reason: v1.ReasonSwapping, msg: "waiting for generation 6", reconciling: true}
	runInstanceSetter(t, v1.ConditionReady, setInstanceReady, map[string]instanceSetterCase{
		"a ready generation serves": {
			facts: instanceFacts{active: servingReady},
			want:  observedCond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonReconciled, "generation 5 serves"),
		},
		"serves while a swap is under way": {
			facts: instanceFacts{active: servingReady, note: swapping},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSwapping, "generation 5 serves; waiting for generation 6"),
		},
		"the active generation is not ready: its own reason": {
			facts: instanceFacts{active: servingProbing},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonProbing, "refused"),
		},
		"the active generation has no Ready yet": {
			facts: instanceFacts{active: genWith(5)},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, "NotReady", "the active generation is not ready"),
		},
		"nothing serves yet": {
			want: observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonProgressing, "no generation serves yet"),
		},
		"nothing serves, a swap noted": {
			facts: instanceFacts{note: swapping},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSwapping, "waiting for generation 6"),
		},
		"a kill unproven comes first": {
			facts: instanceFacts{active: servingReady, unproven: killNotProven, uncertain: mayHaveRun, suspend: true},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ConditionKillUnproven, "a retired unit is not proven gone"),
		},
		"a role's kill unproven": {
			facts: instanceFacts{active: servingReady, note: note{unproven: true, reason: "SeedKillUnproven"}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ConditionKillUnproven, "a retired unit is not proven gone"),
		},
		"a start uncertain": {
			facts: instanceFacts{active: servingReady, uncertain: mayHaveRun},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ConditionStartUncertain, "a start may or may not have run"),
		},
		"suspending": {
			facts: instanceFacts{suspend: true, note: note{reason: v1.ReasonSuspended, msg: "suspending: waiting", reconciling: true}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSuspended, "suspending: waiting"),
		},
		"suspended, as asked": {
			facts: instanceFacts{suspend: true, note: note{reason: v1.ReasonSuspended, msg: "suspended: no generation runs"}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonSuspended, "suspended: no generation runs, as asked"),
		},
		"stalled": {
			facts: instanceFacts{active: servingReady, note: note{reason: v1.ReasonSwapAborted, msg: "generation 6 failed", stalled: true}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSwapAborted, "generation 6 failed"),
		},
		"falling asleep": {
			facts: instanceFacts{idle: true, note: note{reason: v1.ReasonIdle, msg: "idle: waiting", reconciling: true}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonIdle, "idle: waiting"),
		},
		"asleep": {
			facts: instanceFacts{idle: true, note: note{reason: v1.ReasonIdle, msg: "idle since then"}},
			want:  observedCond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonIdle, "idle since then"),
		},
		"woken, a generation starting": {
			facts: instanceFacts{wokenAt: wokenAt, active: servingReady},
			want:  observedCond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonWaking, "a connection woke it; a generation is starting to answer it"),
		},
	})
}

func TestInstanceFactsOf(t *testing.T) {
	retired := genWith(5)
	retired.Spec.Retired = true
	tests := map[string]struct {
		inst *v1.Instance
		gens []*v1.Generation
		want instanceFacts
	}{
		"the active generation, and what is uncertain or unproven": {
			inst: &v1.Instance{Status: v1.InstanceStatus{ObservedGeneration: 3, ActiveGeneration: 5}},
			gens: []*v1.Generation{killNotProven, mayHaveRun, servingReady},
			want: instanceFacts{observed: 3, active: servingReady, uncertain: mayHaveRun, unproven: killNotProven},
		},
		"a retired active generation does not count": {
			inst: &v1.Instance{Status: v1.InstanceStatus{ActiveGeneration: 5}},
			gens: []*v1.Generation{retired},
		},
		"suspended, asleep, woken": {
			inst: &v1.Instance{Spec: v1.InstanceSpec{Suspend: true}, Status: v1.InstanceStatus{IdleSince: wokenAt, WokenAt: wokenAt}},
			want: instanceFacts{suspend: true, idle: true, wokenAt: wokenAt},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := instanceFactsOf(tc.inst, tc.gens, note{})
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(instanceFacts{}, note{})); diff != "" {
				t.Errorf("facts (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestComputeInstanceStatus: the setters together, in order, and
// observedGeneration advancing only with a successful reconcile.
func TestComputeInstanceStatus(t *testing.T) {
	tests := map[string]struct {
		ok           bool
		wantObserved int64
	}{
		"a successful reconcile advances observedGeneration": {ok: true, wantObserved: 4},
		"a failed one keeps it":                              {ok: false, wantObserved: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Status: v1.InstanceStatus{ObservedGeneration: 3, ActiveGeneration: 5}}
			computeInstanceStatus(inst, []*v1.Generation{servingReady}, note{}, tc.ok)
			var got []string
			for _, c := range inst.Status.Conditions {
				if c.ObservedGeneration != tc.wantObserved {
					t.Errorf("%s observed at %d, want %d", c.Type, c.ObservedGeneration, tc.wantObserved)
				}
				got = append(got, c.Type+"="+string(c.Status))
			}
			want := []string{"StartUncertain=False", "KillUnproven=False", "Ready=True"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
			if inst.Status.ObservedGeneration != tc.wantObserved {
				t.Errorf("observedGeneration = %d, want %d", inst.Status.ObservedGeneration, tc.wantObserved)
			}
		})
	}
}

// TestComputeInstanceStatusReadmeStates: what an Instance's conditions say for the
// states the README names that no flow test holds still long enough to
// read: asleep, woken while no generation serves yet, and a generation
// whose kill proof the agent's shutdown cut short (Terminated=False/
// Cancelled), which the next agent's first computation reads as
// KillUnproven.
func TestComputeInstanceStatusReadmeStates(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC))
	numbered := func(n int64, retired bool, g *v1.Generation) *v1.Generation {
		g.Spec.Number, g.Spec.Retired = n, retired
		return g
	}
	for name, tc := range map[string]struct {
		status v1.InstanceStatus
		gens   []*v1.Generation
		want   map[string]string
	}{
		"serving": {
			status: v1.InstanceStatus{ActiveGeneration: 1},
			gens:   []*v1.Generation{numbered(1, false, genIn(v1.PhaseRunning, "Started=True/Running", "Ready=True/Ready"))},
			want:   map[string]string{"Ready": "True/Reconciled", "StartUncertain": "False/Certain", "KillUnproven": "False/Proven"},
		},
		"asleep: Ready, nothing under way": {
			status: v1.InstanceStatus{IdleSince: &at},
			want:   map[string]string{"Ready": "True/Idle", "StartUncertain": "False/Certain", "KillUnproven": "False/Proven"},
		},
		"woken, its generation not serving yet": {
			status: v1.InstanceStatus{WokenAt: &at},
			gens:   []*v1.Generation{numbered(2, false, genIn(v1.PhaseStarting))},
			want: map[string]string{"Ready": "False/Waking", "Reconciling": "True/Waking",
				"StartUncertain": "False/Certain", "KillUnproven": "False/Proven"},
		},
		"a kill proof cut short by the agent's SIGTERM": {
			status: v1.InstanceStatus{ActiveGeneration: 2},
			gens: []*v1.Generation{
				numbered(1, true, genIn(v1.PhaseRetired, "Started=True/Running", "Terminated=False/Cancelled")),
				numbered(2, false, genIn(v1.PhaseRunning, "Started=True/Running", "Ready=True/Ready")),
			},
			want: map[string]string{"Ready": "False/KillUnproven", "StartUncertain": "False/Certain", "KillUnproven": "True/Cancelled"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			inst := &v1.Instance{Status: tc.status}
			computeInstanceStatus(inst, tc.gens, note{}, true)
			got := map[string]string{}
			for _, c := range inst.Status.Conditions {
				got[c.Type] = string(c.Status) + "/" + c.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
		})
	}
}
