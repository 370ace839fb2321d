package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// TestComputeInstanceStatus: what an Instance's conditions say for the
// states the README names that no flow test holds still long enough to
// read: asleep, woken while no generation serves yet, and a generation
// whose kill proof the agent's shutdown cut short (Terminated=False/
// Cancelled), which the next agent's first computation reads as
// KillUnproven.
func TestComputeInstanceStatus(t *testing.T) {
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
