package controllers

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// genIn builds a Generation number 3 in phase with the given conditions
// ("Type=Status/Reason").
func genIn(phase v1.GenerationPhase, conds ...string) *v1.Generation {
	g := &v1.Generation{Spec: v1.GenerationSpec{Number: 3}}
	g.Status.Phase = phase
	for _, c := range conds {
		typ, rest, _ := strings.Cut(c, "=")
		status, reason, _ := strings.Cut(rest, "/")
		g.Status.Conditions = append(g.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason})
	}
	return g
}

// genSummary is what the table compares: phase, conditions, events.
type genSummary struct {
	Phase      v1.GenerationPhase
	Conditions []string
	Events     []string
	MainPID    int64
	Exit       *v1.ExitStatus
}

func summarize(g *v1.Generation, evs []genEvent) genSummary {
	s := genSummary{Phase: g.Status.Phase, MainPID: g.Status.MainPID, Exit: g.Status.Exit}
	for _, c := range g.Status.Conditions {
		s.Conditions = append(s.Conditions, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	sort.Strings(s.Conditions)
	for _, e := range evs {
		s.Events = append(s.Events, e.typ+"/"+e.reason)
	}
	return s
}

func TestGenerationStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	running := outcome.Start{Kind: outcome.Running, MainPID: 7, InvocationID: "abc"}
	exit := &outcome.Exit{Result: "exit-code", Code: 3}
	tests := map[string]struct {
		gen   *v1.Generation
		facts genFacts
		want  genSummary
	}{
		"a fresh start that runs": {
			gen:   genIn(""),
			facts: genFacts{prepared: &preparedFact{fresh: true, unit: "u", cgroup: "/c"}, start: &running},
			want: genSummary{Phase: v1.PhaseStarting, MainPID: 7,
				Conditions: []string{"Prepared=True/Prepared", "Started=True/Running"}},
		},
		"a start refused (proven not run)": {
			gen:   genIn(""),
			facts: genFacts{prepared: &preparedFact{fresh: true}, start: &outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("no")}},
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Prepared=True/Prepared", "Started=False/LaunchRefused"}, Events: []string{"Warning/LaunchRefused"}},
		},
		"a start that exited before it was seen": {
			gen: genIn(""),
			facts: genFacts{prepared: &preparedFact{fresh: true},
				start: &outcome.Start{Kind: outcome.ExitedBeforeObserved, Exit: &outcome.Exit{Result: "exit-code", Code: 1}}},
			want: genSummary{Phase: v1.PhaseFailed, Exit: &v1.ExitStatus{Code: ptr.To(int32(1))},
				Conditions: []string{"Prepared=True/Prepared", "Started=False/ExitedBeforeObserved"}, Events: []string{"Warning/ExitedBeforeObserved"}},
		},
		"a start whose answer was lost stays unknown": {
			gen:   genIn(""),
			facts: genFacts{prepared: &preparedFact{fresh: true}, start: &outcome.Start{Kind: outcome.MayHaveRun}},
			want: genSummary{Phase: v1.PhaseStarting,
				Conditions: []string{"Prepared=True/Prepared", "Started=Unknown/MayHaveRun"}, Events: []string{"Warning/MayHaveRun"}},
		},
		"envFrom unreadable: pending, nothing handed off": {
			gen:   genIn(""),
			facts: genFacts{envErr: errors.New("forbidden")},
			want:  genSummary{Phase: v1.PhasePending, Conditions: []string{"Prepared=False/EnvUnavailable"}},
		},
		"the node could not prepare: pending, nothing handed off": {
			gen:   genIn(""),
			facts: genFacts{prepareErr: errors.New("no space left on device")},
			want:  genSummary{Phase: v1.PhasePending, Conditions: []string{"Prepared=False/PrepareFailed"}},
		},
		"an Instance placed elsewhere": {
			gen:   genIn(""),
			facts: genFacts{notOnNode: "elsewhere"},
			want:  genSummary{Phase: v1.PhaseFailed, Conditions: []string{"Started=False/LaunchRefused"}},
		},
		"the app exited and its cgroup is empty": {
			gen:   genIn(v1.PhaseRunning, "Started=True/Running", "Ready=True/ProbeSucceeded"),
			facts: genFacts{observed: &node.State{Status: units.Status{Exit: exit}}},
			want: genSummary{Phase: v1.PhaseFailed, Exit: &v1.ExitStatus{Code: ptr.To(int32(3))},
				Conditions: []string{"Ready=False/Exited", "Started=True/Exited"}, Events: []string{"Warning/Exited"}},
		},
		"the main process exited, others still run": {
			gen:   genIn(v1.PhaseRunning, "Started=True/Running"),
			facts: genFacts{observed: &node.State{Status: units.Status{Exit: exit, MainPID: 9}, Populated: true}},
			want:  genSummary{Phase: v1.PhaseRunning, MainPID: 9, Conditions: []string{"Started=True/Running"}},
		},
		"a start unknown for too long is given up": {
			gen:   genIn(v1.PhaseStarting, "Started=Unknown/MayHaveRun"),
			facts: genFacts{unresolved: "unknown for 30s"},
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Ready=False/StartUnresolved", "Started=Unknown/MayHaveRun"}, Events: []string{"Warning/StartUnresolved"}},
		},
		"ready": {
			gen:   genIn(v1.PhaseStarting, "Started=True/Running"),
			facts: genFacts{probe: &probeFact{}},
			want: genSummary{Phase: v1.PhaseRunning,
				Conditions: []string{"Ready=True/ProbeSucceeded", "Started=True/Running"}},
		},
		"not ready yet": {
			gen:   genIn(v1.PhaseStarting, "Started=True/Running"),
			facts: genFacts{probe: &probeFact{err: errors.New("refused")}},
			want:  genSummary{Phase: v1.PhaseStarting, Conditions: []string{"Ready=False/Probing", "Started=True/Running"}},
		},
		"not ready in time": {
			gen:   genIn(v1.PhaseStarting, "Started=True/Running"),
			facts: genFacts{probe: &probeFact{err: errors.New("refused"), timedOut: true, timeout: time.Second}},
			want: genSummary{Phase: v1.PhaseFailed,
				Conditions: []string{"Ready=False/ReadinessTimeout", "Started=True/Running"}, Events: []string{"Warning/ReadinessTimeout"}},
		},
		"a kill not proven": {
			gen:   genIn(v1.PhaseRunning, "Started=True/Running"),
			facts: genFacts{kill: &outcome.Kill{Reason: outcome.KillReason(v1.ReasonCgroupNotEmpty), Cause: errors.New("3 pids")}},
			want: genSummary{Phase: v1.PhaseRetiring,
				Conditions: []string{"Started=True/Retired", "Terminated=False/CgroupNotEmpty"}, Events: []string{"Warning/KillUnproven"}},
		},
		"a kill proven": {
			gen:   genIn(v1.PhaseRetiring, "Started=True/Running", "Ready=True/ProbeSucceeded"),
			facts: genFacts{kill: &outcome.Kill{Proven: true}},
			want: genSummary{Phase: v1.PhaseRetired,
				Conditions: []string{"Ready=False/Retired", "Started=True/Retired", "Terminated=True/Proven"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.facts.now = now
			got := summarize(tc.gen, generationStatus(tc.gen, tc.facts))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPhaseCounts(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a-g1"}, types.NamespacedName{Namespace: "ns", Name: "b-g1"}
	var p phaseCounts
	p.set(a, v1.PhaseStarting)
	p.set(b, v1.PhaseStarting)
	p.set(a, v1.PhaseRunning)
	p.set(a, v1.PhaseRunning)
	p.forget(b)
	p.forget(b)
	want := map[string]int{string(v1.PhaseStarting): 0, string(v1.PhaseRunning): 1}
	if diff := cmp.Diff(want, p.counts); diff != "" {
		t.Errorf("counts (-want,+got):\n%s", diff)
	}
}
