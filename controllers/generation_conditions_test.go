package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// Facts the setters' tables share.
var (
	startRunning = &outcome.Start{Kind: outcome.Running, MainPID: 7, InvocationID: "abc"}
	exit3        = &outcome.Exit{Result: "exit-code", Code: 3}
	execNotFound = &outcome.Exit{Result: "exit-code", Code: 127, ExecFailed: "no such file"}
	exitedNow    = &node.State{Status: units.Status{Exit: exit3}}
	oomKilledNow = &node.State{Status: units.Status{Exit: &outcome.Exit{Result: "signal", Signal: 9}},
		OOM: &node.OOM{Kills: 1, MemoryLimitBytes: 16 << 20}}
	killProven    = &outcome.Kill{Proven: true}
	killUnproven3 = &outcome.Kill{Reason: outcome.KillReason(v1.ReasonCgroupNotEmpty), Cause: errors.New("3 pids")}
)

// genCond is typ's condition of g as "Status/Reason: message"; "" when
// absent.
func genCond(g *v1.Generation, typ string) string {
	for _, c := range g.Status.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason + ": " + c.Message
		}
	}
	return ""
}

// eventsOf is evs as "type/reason: message".
func eventsOf(evs []genEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ+"/"+e.reason+": "+e.msg)
	}
	return out
}

// genSetterCase is one row of a Generation condition setter's table.
type genSetterCase struct {
	gen        *v1.Generation // nil: a fresh Generation 3
	facts      genFacts
	want       string
	wantEvents []string
}

func runGenSetter(t *testing.T, typ string, set func(*v1.Generation, genView) []genEvent, tests map[string]genSetterCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := genIn("")
			if tc.gen != nil {
				g = tc.gen.DeepCopy() // rows share their builders' output
			}
			evs := set(g, viewOf(g, tc.facts))
			if diff := cmp.Diff(tc.want, genCond(g, typ)); diff != "" {
				t.Errorf("%s (-want,+got):\n%s", typ, diff)
			}
			if diff := cmp.Diff(tc.wantEvents, eventsOf(evs)); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSetPrepared(t *testing.T) {
	noEvents := func(g *v1.Generation, v genView) []genEvent { setPrepared(g, v); return nil }
	runGenSetter(t, v1.ConditionPrepared, noEvents, map[string]genSetterCase{
		"nothing learnt": {},
		"prepared now":   {facts: genFacts{prepared: &preparedFact{fresh: true}}, want: "True/Prepared: prepared"},
		"prepared now, with warnings": {
			facts: genFacts{prepared: &preparedFact{fresh: true, warnings: []string{"no swap limit"}}},
			want:  "True/Prepared: prepared with warnings: [no swap limit]",
		},
		"prepared earlier in this process": {facts: genFacts{prepared: &preparedFact{warnings: []string{"w"}}}, want: "True/Prepared: prepared"},
		"envFrom unreadable":               {facts: genFacts{envErr: errors.New("forbidden")}, want: "False/EnvUnavailable: forbidden"},
		"the node could not prepare": {
			facts: genFacts{prepareErr: errors.New("no space left on device")},
			want:  "False/PrepareFailed: retrying: no space left on device",
		},
		"an Instance elsewhere says nothing of preparing": {facts: genFacts{notOnNode: "elsewhere", envErr: errors.New("x")}},
	})
}

func TestSetStarted(t *testing.T) {
	running := genIn(v1.PhaseRunning, "Started=True/Running")
	running.Status.MainPID = 7
	runGenSetter(t, v1.ConditionStarted, setStarted, map[string]genSetterCase{
		"nothing learnt": {},
		"an Instance placed elsewhere": {
			facts: genFacts{notOnNode: "elsewhere"},
			want:  "False/LaunchRefused: elsewhere",
		},
		"running": {facts: genFacts{start: startRunning}, want: "True/Running: running as pid 7"},
		"refused": {
			facts:      genFacts{start: &outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("no user")}},
			want:       "False/LaunchRefused: no user",
			wantEvents: []string{"Warning/LaunchRefused: generation 3 not started: no user"},
		},
		"crashed at start": {
			facts:      genFacts{start: &outcome.Start{Kind: outcome.ExitedBeforeObserved, Exit: exit3}},
			want:       "False/ExitedBeforeObserved: ExitedBeforeObserved",
			wantEvents: []string{"Warning/ExitedBeforeObserved: generation 3 crashed at start: ExitedBeforeObserved"},
		},
		"its command could not be executed": {
			facts:      genFacts{start: &outcome.Start{Kind: outcome.ExitedBeforeObserved, Exit: execNotFound}},
			want:       "False/ExecFailed: the command could not be executed: no such file",
			wantEvents: []string{"Warning/ExecFailed: generation 3: the command could not be executed: no such file"},
		},
		"may have run: never claimed either way": {
			facts:      genFacts{start: &outcome.Start{Kind: outcome.MayHaveRun}},
			want:       "Unknown/MayHaveRun: MayHaveRun",
			wantEvents: []string{"Warning/MayHaveRun: generation 3 may have run: MayHaveRun"},
		},
		"exited after running": {
			gen:        running,
			facts:      genFacts{observed: exitedNow},
			want:       "True/Exited: ran as pid 7, then exit code 3 (exit-code)",
			wantEvents: []string{"Warning/Exited: generation 3 exited: exit code 3 (exit-code)"},
		},
		"OOM-killed after running": {
			gen:        running,
			facts:      genFacts{observed: oomKilledNow},
			want:       "True/OOMKilled: ran as pid 7, then killed by SIGKILL (signal): the kernel OOM-killed 1 process in its cgroup at its memory limit of 16Mi",
			wantEvents: []string{"Warning/OOMKilled: generation 3 exited: killed by SIGKILL (signal): the kernel OOM-killed 1 process in its cgroup at its memory limit of 16Mi"},
		},
		"the main process exited, others still run": {
			gen:   running,
			facts: genFacts{observed: &node.State{Status: units.Status{Exit: exit3, MainPID: 9}, Populated: true}},
			want:  "True/Running: ",
		},
		"an exit after a failure says nothing more": {
			gen:   genIn(v1.PhaseFailed, "Started=True/Running"),
			facts: genFacts{observed: exitedNow},
			want:  "True/Running: ",
		},
		"a kill sent, not proven": {
			gen:   running,
			facts: genFacts{kill: killUnproven3},
			want:  "True/Retired: ran as pid 7; asked to stop, its end not proven yet (see Terminated)",
		},
		"a kill proven": {gen: running, facts: genFacts{kill: killProven}, want: "True/Retired: ran as pid 7, then was stopped"},
		"a kill of one that never ran leaves Started": {
			gen:   genIn(v1.PhaseFailed, "Started=False/LaunchRefused"),
			facts: genFacts{kill: killProven},
			want:  "False/LaunchRefused: ",
		},
	})
}

func TestSetGenerationReady(t *testing.T) {
	starting := genIn(v1.PhaseStarting, "Started=True/Running")
	runGenSetter(t, v1.ConditionReady, setGenerationReady, map[string]genSetterCase{
		"nothing learnt":  {gen: starting},
		"probe succeeded": {gen: starting, facts: genFacts{probe: &probeFact{}}, want: "True/ProbeSucceeded: readiness probe succeeded"},
		"still probing":   {gen: starting, facts: genFacts{probe: &probeFact{err: errors.New("refused")}}, want: "False/Probing: refused"},
		"not ready in time": {
			gen:        starting,
			facts:      genFacts{probe: &probeFact{err: errors.New("refused"), timedOut: true, timeout: time.Second}},
			want:       "False/ReadinessTimeout: not ready within 1s: refused",
			wantEvents: []string{"Warning/ReadinessTimeout: generation 3 not ready within 1s"},
		},
		"exited": {gen: starting, facts: genFacts{observed: exitedNow}, want: "False/Exited: exit code 3 (exit-code)"},
		"OOM-killed": {
			gen: starting, facts: genFacts{observed: oomKilledNow},
			want: "False/OOMKilled: killed by SIGKILL (signal): the kernel OOM-killed 1 process in its cgroup at its memory limit of 16Mi",
		},
		"its command could not be executed, seen at start": {
			facts: genFacts{start: &outcome.Start{Kind: outcome.ExitedBeforeObserved, Exit: execNotFound}},
			want:  "False/ExecFailed: the command could not be executed: no such file",
		},
		"its command could not be executed, seen later": {
			gen:   starting,
			facts: genFacts{observed: &node.State{Status: units.Status{Exit: execNotFound}}},
			want:  "False/ExecFailed: the command could not be executed: no such file",
		},
		"a start unknown for too long": {
			gen:        genIn(v1.PhaseStarting, "Started=Unknown/MayHaveRun"),
			facts:      genFacts{unresolved: "unknown for 30s"},
			want:       "False/StartUnresolved: unknown for 30s",
			wantEvents: []string{"Warning/StartUnresolved: generation 3: unknown for 30s"},
		},
		"retired": {
			gen:   genIn(v1.PhaseRetiring, "Started=True/Running", "Ready=True/ProbeSucceeded"),
			facts: genFacts{kill: killProven},
			want:  "False/Retired: generation retired",
		},
		"retired while probing": {
			gen:   genIn(v1.PhaseRetiring, "Started=True/Running", "Ready=False/Probing"),
			facts: genFacts{kill: killProven},
			want:  "False/Retired: generation retired",
		},
		"retired after its readiness timeout: Ready keeps why": {
			gen:   genIn(v1.PhaseRetiring, "Started=True/Running", "Ready=False/ReadinessTimeout"),
			facts: genFacts{kill: killProven},
			want:  "False/ReadinessTimeout: ",
		},
		"a kill not proven keeps Ready as it was": {
			gen:   genIn(v1.PhaseRetiring, "Started=True/Running", "Ready=True/ProbeSucceeded"),
			facts: genFacts{kill: killUnproven3},
			want:  "True/ProbeSucceeded: ",
		},
	})
}

func TestSetDrained(t *testing.T) {
	runGenSetter(t, v1.ConditionDrained, setDrained, map[string]genSetterCase{
		"no drain": {},
		"draining": {
			facts: genFacts{drain: &drainFact{state: node.DrainState{Needed: true}, took: 20 * time.Millisecond, limit: time.Second}},
			want:  "Unknown/Draining: superseded; waiting for its listener to drain (" + (node.DrainState{Needed: true}).String() + " after 20ms, limit 1s)",
		},
		"drained: its condition says it, no event": {
			facts: genFacts{drain: &drainFact{ended: v1.ReasonDrainProven, took: 40 * time.Millisecond}},
			want:  "True/DrainProven: drained in 40ms: nothing queued, no accepted connection open",
		},
		"drained, its kill not proven: the kill's warning says it": {
			facts: genFacts{drain: &drainFact{ended: v1.ReasonDrainProven, took: 40 * time.Millisecond}, kill: killUnproven3},
			want:  "True/DrainProven: drained in 40ms: nothing queued, no accepted connection open",
		},
		"the limit said again: no second event": {
			facts: genFacts{drain: &drainFact{ended: v1.ReasonDrainLimit, err: errors.New("ss failed"), limit: time.Second, repeat: true}},
			want:  "False/DrainLimit: drain limit 1s reached (ss failed); stopped anyway",
		},
		"the limit passed": {
			facts:      genFacts{drain: &drainFact{ended: v1.ReasonDrainLimit, err: errors.New("ss failed"), limit: time.Second}},
			want:       "False/DrainLimit: drain limit 1s reached (ss failed); stopped anyway",
			wantEvents: []string{"Warning/DrainLimit: generation 3: drain limit 1s reached (ss failed); stopped anyway"},
		},
	})
}

func TestSetTerminated(t *testing.T) {
	deletedGen := genIn("")
	deletedGen.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	runGenSetter(t, v1.ConditionTerminated, setTerminated, map[string]genSetterCase{
		"no kill": {},
		"proven: Terminated keeps it, no event": {
			facts: genFacts{kill: killProven},
			want:  "True/Proven: stopped; unit inactive and cgroup seen empty",
		},
		"drained and proven gone: no event either": {
			facts: genFacts{drain: &drainFact{ended: v1.ReasonDrainProven, took: 40 * time.Millisecond}, kill: killProven},
			want:  "True/Proven: stopped; unit inactive and cgroup seen empty",
		},
		"proven while deleted: its status goes with it, so an event": {
			gen:        deletedGen,
			facts:      genFacts{kill: killProven},
			want:       "True/Proven: stopped; unit inactive and cgroup seen empty",
			wantEvents: []string{"Normal/Retired: generation 3 proven gone"},
		},
		"not proven": {
			facts:      genFacts{kill: killUnproven3},
			want:       "False/CgroupNotEmpty: " + killUnproven3.Err().Error(),
			wantEvents: []string{"Warning/KillUnproven: generation 3 kill unproven: " + killUnproven3.Err().Error()},
		},
	})
}

func TestSetGenerationPhase(t *testing.T) {
	tests := map[string]struct {
		phase v1.GenerationPhase
		facts genFacts
		want  v1.GenerationPhase
	}{
		"nothing learnt keeps it":        {phase: v1.PhaseRunning, want: v1.PhaseRunning},
		"placed elsewhere":               {facts: genFacts{notOnNode: "x"}, want: v1.PhaseFailed},
		"envFrom unreadable":             {facts: genFacts{envErr: errors.New("x")}, want: v1.PhasePending},
		"could not prepare":              {facts: genFacts{prepareErr: errors.New("x")}, want: v1.PhasePending},
		"prepared now":                   {facts: genFacts{prepared: &preparedFact{fresh: true}, start: startRunning}, want: v1.PhaseStarting},
		"prepared earlier keeps it":      {phase: v1.PhaseStarting, facts: genFacts{prepared: &preparedFact{}, start: startRunning}, want: v1.PhaseStarting},
		"refused":                        {facts: genFacts{start: &outcome.Start{Kind: outcome.NotStarted}}, want: v1.PhaseFailed},
		"crashed at start":               {facts: genFacts{start: &outcome.Start{Kind: outcome.ExitedBeforeObserved}}, want: v1.PhaseFailed},
		"may have run: still starting":   {facts: genFacts{prepared: &preparedFact{fresh: true}, start: &outcome.Start{Kind: outcome.MayHaveRun}}, want: v1.PhaseStarting},
		"exited":                         {phase: v1.PhaseRunning, facts: genFacts{observed: exitedNow}, want: v1.PhaseFailed},
		"given up on an unknown start":   {phase: v1.PhaseStarting, facts: genFacts{unresolved: "u"}, want: v1.PhaseFailed},
		"ready":                          {phase: v1.PhaseStarting, facts: genFacts{probe: &probeFact{}}, want: v1.PhaseRunning},
		"probing":                        {phase: v1.PhaseStarting, facts: genFacts{probe: &probeFact{err: errors.New("x")}}, want: v1.PhaseStarting},
		"not ready in time":              {phase: v1.PhaseStarting, facts: genFacts{probe: &probeFact{err: errors.New("x"), timedOut: true}}, want: v1.PhaseFailed},
		"a kill not proven":              {phase: v1.PhaseRunning, facts: genFacts{kill: killUnproven3}, want: v1.PhaseRetiring},
		"a kill not proven after proven": {phase: v1.PhaseRetired, facts: genFacts{kill: killUnproven3}, want: v1.PhaseRetired},
		"a kill proven":                  {phase: v1.PhaseFailed, facts: genFacts{kill: killProven}, want: v1.PhaseRetired},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := genIn(tc.phase)
			setGenerationPhase(g, viewOf(g, tc.facts))
			if diff := cmp.Diff(tc.want, g.Status.Phase); diff != "" {
				t.Errorf("phase (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSetGenerationRecord(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	withPID := func(pid int64) *v1.Generation {
		g := genIn(v1.PhaseRunning, "Started=True/Running")
		g.Status.MainPID = pid
		return g
	}
	tests := map[string]struct {
		gen   *v1.Generation
		facts genFacts
		want  v1.GenerationStatus
	}{
		"prepared and running": {
			gen:   genIn(""),
			facts: genFacts{prepared: &preparedFact{fresh: true, unit: "u.service", cgroup: "/c"}, start: startRunning},
			want:  v1.GenerationStatus{Unit: "u.service", Cgroup: "/c", StartedAt: &metav1.Time{Time: now}, InvocationID: "abc", MainPID: 7},
		},
		"crashed at start": {
			gen:   genIn(""),
			facts: genFacts{start: &outcome.Start{Kind: outcome.ExitedBeforeObserved, Exit: exit3}},
			want:  v1.GenerationStatus{Exit: &v1.ExitStatus{Code: ptr.To(int32(3))}},
		},
		"the main process as observed now": {
			gen:   withPID(7),
			facts: genFacts{observed: &node.State{Status: units.Status{MainPID: 9}}},
			want:  v1.GenerationStatus{MainPID: 9},
		},
		"an exit keeps the pid it ran as": {
			gen:   withPID(7),
			facts: genFacts{observed: exitedNow},
			want:  v1.GenerationStatus{MainPID: 7, Exit: &v1.ExitStatus{Code: ptr.To(int32(3))}},
		},
		"a proven kill clears the pid": {gen: withPID(7), facts: genFacts{kill: killProven}},
		"a kill not proven keeps it":   {gen: withPID(7), facts: genFacts{kill: killUnproven3}, want: v1.GenerationStatus{MainPID: 7}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.facts.now = now
			g := tc.gen.DeepCopy()
			setGenerationRecord(g, viewOf(g, tc.facts))
			got := g.Status
			got.Phase, got.Conditions = "", nil // not the record's
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("record (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestViewOf(t *testing.T) {
	tests := map[string]struct {
		phase       v1.GenerationPhase
		facts       genFacts
		wantExit    *outcome.Exit
		wantMainPID int64
	}{
		"an exit with its cgroup empty ends it": {phase: v1.PhaseRunning, facts: genFacts{observed: exitedNow}, wantExit: exit3, wantMainPID: 5},
		"an exit with others still running does not": {
			phase: v1.PhaseRunning, facts: genFacts{observed: &node.State{Status: units.Status{Exit: exit3}, Populated: true}}, wantMainPID: 5,
		},
		"an exit of one failed already does not": {phase: v1.PhaseFailed, facts: genFacts{observed: exitedNow}, wantMainPID: 5},
		"an exit of one failed by this start does not": {
			phase: v1.PhaseStarting, facts: genFacts{start: &outcome.Start{Kind: outcome.NotStarted}, observed: exitedNow}, wantMainPID: 5,
		},
		"the pid of the start":            {facts: genFacts{start: startRunning}, wantMainPID: 7},
		"the pid observed after it":       {facts: genFacts{start: startRunning, observed: &node.State{Status: units.Status{MainPID: 9}}}, wantMainPID: 9},
		"no pid observed: the one before": {facts: genFacts{observed: &node.State{}}, wantMainPID: 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := genIn(tc.phase)
			g.Status.MainPID = 5
			v := viewOf(g, tc.facts)
			if diff := cmp.Diff(tc.wantExit, v.exit); diff != "" {
				t.Errorf("exit (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMainPID, v.mainPID); diff != "" {
				t.Errorf("mainPID (-want,+got):\n%s", diff)
			}
		})
	}
}
