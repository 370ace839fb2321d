package metrics

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gathered reads family name from controller-runtime's registry (what the
// manager serves) as "label=value,..." -> value; a histogram's value is
// its sample count. Only series whose labels contain every pair of match
// are kept, so tests sharing the registry see their own series.
func gathered(t *testing.T, name string, match map[string]string) map[string]float64 {
	t.Helper()
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			var pairs []string
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
				pairs = append(pairs, l.GetName()+"="+l.GetValue())
			}
			for k, v := range match {
				if have[k] != v {
					continue series
				}
			}
			sort.Strings(pairs)
			got[strings.Join(pairs, ",")] = value(f.GetType(), m)
		}
	}
	return got
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func cond(t, s string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s)}
}

func TestSetInstanceConditions(t *testing.T) {
	tests := map[string]struct {
		calls [][]metav1.Condition // applied in order to one Instance
		want  map[string]float64
	}{
		"every type at its normal status: no series": {
			calls: [][]metav1.Condition{{cond("Ready", "True"), cond("Reconciling", "False"), cond("Stalled", "False"),
				cond("StartUncertain", "False"), cond("KillUnproven", "False"), cond("Scheduled", "True")}},
			want: map[string]float64{},
		},
		"a type away from normal has one series, on its status": {
			calls: [][]metav1.Condition{{cond("Ready", "False"), cond("KillUnproven", "True"), cond("StartUncertain", "False")}},
			want: map[string]float64{
				"name=web,namespace=%s,status=False,type=Ready":       1,
				"name=web,namespace=%s,status=True,type=KillUnproven": 1,
			},
		},
		"abnormal-true types away from normal": {
			calls: [][]metav1.Condition{{cond("Reconciling", "True"), cond("Stalled", "True"), cond("StartUncertain", "True"),
				cond("Scheduled", "False")}},
			want: map[string]float64{
				"name=web,namespace=%s,status=True,type=Reconciling":    1,
				"name=web,namespace=%s,status=True,type=Stalled":        1,
				"name=web,namespace=%s,status=True,type=StartUncertain": 1,
				"name=web,namespace=%s,status=False,type=Scheduled":     1,
			},
		},
		"back to normal removes the series": {
			calls: [][]metav1.Condition{{cond("Ready", "False"), cond("Reconciling", "True")}, {cond("Ready", "True"), cond("Reconciling", "False")}},
			want:  map[string]float64{},
		},
		"another abnormal status replaces the earlier": {
			calls: [][]metav1.Condition{{cond("Ready", "False")}, {cond("Ready", "Unknown")}},
			want:  map[string]float64{"name=web,namespace=%s,status=Unknown,type=Ready": 1},
		},
		"a type that is gone loses its series": {
			calls: [][]metav1.Condition{{cond("Ready", "False"), cond("StartUncertain", "True")}, {cond("Ready", "False")}},
			want:  map[string]float64{"name=web,namespace=%s,status=False,type=Ready": 1},
		},
		"Unknown is away from normal whatever the polarity": {
			calls: [][]metav1.Condition{{cond("Ready", "Unknown"), cond("KillUnproven", "Unknown")}},
			want: map[string]float64{
				"name=web,namespace=%s,status=Unknown,type=Ready":        1,
				"name=web,namespace=%s,status=Unknown,type=KillUnproven": 1,
			},
		},
		"an unexpected status counts as Unknown": {
			calls: [][]metav1.Condition{{cond("Ready", "")}},
			want:  map[string]float64{"name=web,namespace=%s,status=Unknown,type=Ready": 1},
		},
		"a type with no known normal status always has its series": {
			calls: [][]metav1.Condition{{cond("Custom", "True")}, {cond("Custom", "False")}},
			want:  map[string]float64{"name=web,namespace=%s,status=False,type=Custom": 1},
		},
		"no conditions, no series": {
			calls: [][]metav1.Condition{{cond("Ready", "False")}, nil},
			want:  map[string]float64{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := "set-" + strings.ReplaceAll(name, " ", "-")
			t.Cleanup(func() { DeleteInstance(ns, "web") })
			for _, conds := range tc.calls {
				SetInstanceConditions(ns, "web", conds)
			}
			want := map[string]float64{}
			for k, v := range tc.want {
				want[strings.Replace(k, "%s", ns, 1)] = v
			}
			got := gathered(t, NameInstanceCondition, map[string]string{"namespace": ns})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("series (-want,+got):\n%s", diff)
			}
		})
	}
}

// An Instance back in its normal state leaves nothing behind in the
// recorder: a node of settled Instances costs no memory per Instance here.
func TestRecorderForgetsNormalInstances(t *testing.T) {
	r, err := newRecorder(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.setInstanceConditions("ns", "web", []metav1.Condition{cond("Ready", "False"), cond("Reconciling", "True")})
	if len(r.conditions) != 1 {
		t.Fatalf("abnormal Instance not tracked: %v", r.conditions)
	}
	r.setInstanceConditions("ns", "web", []metav1.Condition{cond("Ready", "True"), cond("KillUnproven", "False")})
	if len(r.conditions) != 0 {
		t.Errorf("normal Instance still tracked: %v", r.conditions)
	}
}

func TestDeleteInstanceRemovesItsSeries(t *testing.T) {
	const ns = "delete"
	t.Cleanup(func() { DeleteInstance(ns, "gone"); DeleteInstance(ns, "kept") })
	conds := []metav1.Condition{{Type: "Ready", Status: "False", Reason: "Suspended"}, cond("Reconciling", "True")}
	SetInstanceConditions(ns, "gone", conds)
	SetInstanceConditions(ns, "kept", conds)
	for _, name := range []string{NameInstanceCondition, NameInstanceSuspended} {
		if got := gathered(t, name, map[string]string{"namespace": ns, "name": "gone"}); len(got) == 0 {
			t.Fatalf("before delete: no %s series of gone", name)
		}
	}

	DeleteInstance(ns, "gone")

	for _, name := range []string{NameInstanceCondition, NameInstanceSuspended} {
		if got := gathered(t, name, map[string]string{"namespace": ns, "name": "gone"}); len(got) != 0 {
			t.Errorf("after delete, %s series of gone remain: %v", name, got)
		}
	}
	if n := len(gathered(t, NameInstanceCondition, map[string]string{"namespace": ns, "name": "kept"})); n != 2 {
		t.Errorf("after deleting gone: %d series of kept, want 2", n)
	}
	// Setting it again after a delete starts from nothing: no stale types.
	SetInstanceConditions(ns, "gone", []metav1.Condition{cond("Ready", "Unknown")})
	want := map[string]float64{"name=gone,namespace=delete,status=Unknown,type=Ready": 1}
	if diff := cmp.Diff(want, gathered(t, NameInstanceCondition, map[string]string{"namespace": ns, "name": "gone"})); diff != "" {
		t.Errorf("re-set after delete (-want,+got):\n%s", diff)
	}
}

func TestInstanceSuspended(t *testing.T) {
	const ns = "suspended"
	t.Cleanup(func() { DeleteInstance(ns, "web") })
	suspended := map[string]float64{"name=web,namespace=suspended": 1}
	tests := []struct {
		name  string
		ready metav1.Condition
		want  map[string]float64
	}{
		{"suspending", metav1.Condition{Type: "Ready", Status: "False", Reason: "Suspended"}, suspended},
		{"suspended", metav1.Condition{Type: "Ready", Status: "True", Reason: "Suspended"}, suspended},
		{"not ready for another reason", metav1.Condition{Type: "Ready", Status: "False", Reason: "KillUnproven"}, map[string]float64{}},
		{"suspended again", metav1.Condition{Type: "Ready", Status: "True", Reason: "Suspended"}, suspended},
		{"ready", metav1.Condition{Type: "Ready", Status: "True", Reason: "Reconciled"}, map[string]float64{}},
	}
	for _, tc := range tests { // in order: each replaces the one before
		SetInstanceConditions(ns, "web", []metav1.Condition{tc.ready})
		if diff := cmp.Diff(tc.want, gathered(t, NameInstanceSuspended, map[string]string{"namespace": ns})); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.name, diff)
		}
	}
}

func TestSetGenerationPhases(t *testing.T) {
	SetGenerationPhases(map[string]int{"Running": 3, "Retiring": 1, "Odd": 2})
	SetGenerationPhases(map[string]int{"Running": 2})
	want := map[string]float64{
		"phase=Pending": 0, "phase=Preparing": 0, "phase=Starting": 0, "phase=Running": 2,
		"phase=Retiring": 0, "phase=Retired": 0, "phase=Failed": 0, "phase=Odd": 0,
	}
	if diff := cmp.Diff(want, gathered(t, NameGenerations, nil)); diff != "" {
		t.Errorf("unitlet_generations (-want,+got):\n%s", diff)
	}
}

func TestObserveStart(t *testing.T) {
	before := gathered(t, NameStarts, nil)
	for _, k := range []string{"NotStarted", "MayHaveRun", "QueuedJobMayRun", "Running", "ExitedBeforeObserved"} {
		if _, ok := before["outcome="+k]; !ok {
			t.Errorf("outcome %s has no series before its first start", k)
		}
	}
	startsBefore := gathered(t, NameStartDuration, nil)[""]

	ObserveStart("MayHaveRun", 30*time.Millisecond)
	ObserveStart("Running", 10*time.Millisecond)
	ObserveStart("Running", 20*time.Millisecond)

	after := gathered(t, NameStarts, nil)
	for k, delta := range map[string]float64{"outcome=Running": 2, "outcome=MayHaveRun": 1, "outcome=NotStarted": 0} {
		if got := after[k] - before[k]; got != delta {
			t.Errorf("%s grew by %v, want %v", k, got, delta)
		}
	}
	if got := gathered(t, NameStartDuration, nil)[""] - startsBefore; got != 3 {
		t.Errorf("start duration observations grew by %v, want 3", got)
	}
}

func TestObserveKill(t *testing.T) {
	kills := func() map[string]float64 { return gathered(t, NameKills, nil) }
	toEmpty := func() float64 { return gathered(t, NameKillToEmpty, nil)[""] }
	before, emptyBefore := kills(), toEmpty()
	if _, ok := before["proof=Unproven,reason=CgroupNotEmpty"]; !ok {
		t.Errorf("unproven CgroupNotEmpty has no series before its first kill: %v", before)
	}

	ObserveKill(true, "", 5*time.Millisecond)
	ObserveKill(false, "ProofTimedOut", 10*time.Second)
	ObserveKill(false, "ProofTimedOut", 10*time.Second)

	after := kills()
	for k, delta := range map[string]float64{"proof=Proven,reason=Proven": 1, "proof=Unproven,reason=ProofTimedOut": 2} {
		if got := after[k] - before[k]; got != delta {
			t.Errorf("%s grew by %v, want %v", k, got, delta)
		}
	}
	// Only the proven kill saw its cgroup empty.
	if got := toEmpty() - emptyBefore; got != 1 {
		t.Errorf("kill-to-empty observations grew by %v, want 1", got)
	}
}

func TestObserveHistogramsByLabel(t *testing.T) {
	ObservePrepareStep("hist-dirs", time.Millisecond)
	ObservePrepareStep("hist-dirs", 2*time.Millisecond)
	ObservePrepareStep("hist-socket", time.Millisecond)
	ObserveSwap("Overlap", "hist-Succeeded", 3*time.Second)
	ObserveSwap("Replace", "hist-Aborted", time.Second)

	if diff := cmp.Diff(map[string]float64{"step=hist-dirs": 2, "step=hist-socket": 1},
		gathered(t, NamePrepareStep, nil), cmpOnly("step=hist-")); diff != "" {
		t.Errorf("prepare steps (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"result=hist-Succeeded,strategy=Overlap": 1, "result=hist-Aborted,strategy=Replace": 1},
		gathered(t, NameSwapDuration, nil), cmpOnly("result=hist-")); diff != "" {
		t.Errorf("swaps (-want,+got):\n%s", diff)
	}
}

// Drains and runs have a series per result before the first one, so the
// dashboard's panels show 0 rather than nothing.
func TestDrainAndRunResultsHaveSeries(t *testing.T) {
	tests := map[string]struct {
		name string
		want []string
	}{
		"drains": {NameDrainDuration, []string{"result=DrainLimit", "result=DrainProven"}},
		"runs": {NameRunDuration, []string{"result=abandoned", "result=failed", "result=interrupted",
			"result=notStarted", "result=succeeded", "result=unproven"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for k := range gathered(t, tc.name, nil) {
				got = append(got, k)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s series (-want,+got):\n%s", tc.name, diff)
			}
		})
	}
}

// cmpOnly compares only the map entries whose key starts with prefix.
func cmpOnly(prefix string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		mi, ok := p.Last().(cmp.MapIndex)
		return ok && !strings.HasPrefix(mi.Key().String(), prefix)
	}, cmp.Ignore())
}

func TestSetMode(t *testing.T) {
	SetMode(ModeJoining)
	if diff := cmp.Diff(map[string]float64{"mode=joining": 1, "mode=hosting": 0}, gathered(t, NameAgentMode, nil)); diff != "" {
		t.Errorf("joining (-want,+got):\n%s", diff)
	}
	SetMode(ModeHosting)
	if diff := cmp.Diff(map[string]float64{"mode=joining": 0, "mode=hosting": 1}, gathered(t, NameAgentMode, nil)); diff != "" {
		t.Errorf("hosting (-want,+got):\n%s", diff)
	}
}

func TestSetAgentInfo(t *testing.T) {
	SetAgentInfo("n1", "v0.1.0", "systemd")
	SetAgentInfo("n1", "v0.2.0", "systemd")
	want := map[string]float64{"backend=systemd,node=n1,version=v0.2.0": 1}
	if diff := cmp.Diff(want, gathered(t, NameAgentInfo, nil)); diff != "" {
		t.Errorf("agent info (-want,+got):\n%s", diff)
	}
}

// The collectors lint clean (names, help, units) as promtool would.
func TestCollectorsLint(t *testing.T) {
	for _, c := range newCollectors().all() {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestLogLineDropped(t *testing.T) {
	const ns = "dropped"
	t.Cleanup(func() { DeleteInstance(ns, "web") })
	LogLineDropped(ns, "web", "NoSpace")
	LogLineDropped(ns, "web", "NoSpace")
	LogLineDropped(ns, "web", "WriteError")
	want := map[string]float64{
		"name=web,namespace=dropped,reason=NoSpace":    2,
		"name=web,namespace=dropped,reason=WriteError": 1,
	}
	if diff := cmp.Diff(want, gathered(t, NameLogLinesDropped, map[string]string{"namespace": ns})); diff != "" {
		t.Errorf("%s (-want,+got):\n%s", NameLogLinesDropped, diff)
	}
	DeleteInstance(ns, "web")
	if got := gathered(t, NameLogLinesDropped, map[string]string{"namespace": ns}); len(got) != 0 {
		t.Errorf("after delete, series remain: %v", got)
	}
}
