package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
)

// TestGoneWithBootStatus: after a reboot every generation of the old
// boot reads Terminated=True/NodeRebooted, whatever its start or kill had
// proven; none reads a start that may have run or a kill unproven.
func TestGoneWithBootStatus(t *testing.T) {
	rebooted := boot.Verdict{Reason: boot.Changed, Previous: "a", Current: "b"}
	retired := func(g *v1.Generation) *v1.Generation {
		g.Spec.Retired = true
		return g
	}
	tests := map[string]struct {
		gen  *v1.Generation
		want genSummary
	}{
		"serving": {
			gen: genIn(v1.PhaseRunning, "Started=True/Running", "Ready=True/ProbeSucceeded"),
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Ready=False/NodeRebooted", "Started=True/NodeRebooted", "Terminated=True/NodeRebooted"}},
		},
		"mid-swap, not ready yet": {
			gen: genIn(v1.PhaseStarting, "Started=True/Running", "Ready=False/Probing"),
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Ready=False/NodeRebooted", "Started=True/NodeRebooted", "Terminated=True/NodeRebooted"}},
		},
		"a start that may have run is settled": {
			gen: genIn(v1.PhaseStarting, "Started=Unknown/MayHaveRun"),
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Ready=False/NodeRebooted", "Started=False/NodeRebooted", "Terminated=True/NodeRebooted"}},
		},
		"a kill unproven is proven": {
			gen: retired(genIn(v1.PhaseRetiring, "Started=True/Retired", "Terminated=False/CgroupNotEmpty")),
			want: genSummary{Phase: v1.PhaseRetired,
				Conditions: []string{"Ready=False/NodeRebooted", "Started=True/NodeRebooted", "Terminated=True/NodeRebooted"}},
		},
		"never started": {
			gen:  genIn(v1.PhasePending, "Prepared=False/PrepareFailed"),
			want: genSummary{Phase: v1.PhaseFailed, Conditions: []string{"Prepared=False/PrepareFailed", "Ready=False/NodeRebooted", "Terminated=True/NodeRebooted"}},
		},
		"proven gone before the reboot: its proof stands": {
			gen: retired(genIn(v1.PhaseRetired, "Started=True/Retired", "Terminated=True/Proven")),
			want: genSummary{Phase: v1.PhaseRetired, MainPID: 42,
				Conditions: []string{"Started=True/Retired", "Terminated=True/Proven"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.gen.Status.MainPID = 42
			got := summarize(tc.gen, generationStatus(tc.gen, genFacts{rebooted: &rebooted}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if !terminated(tc.gen) {
				t.Error("not terminated")
			}
		})
	}
}
