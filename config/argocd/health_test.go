package argocd

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// health is what Argo CD reads back from a health script.
type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// runHealth runs script the way Argo CD does (argo-cd util/lua): a state
// with only the package, base and table libraries, a one-second budget,
// the object converted from its unstructured form into the global obj,
// and the returned table read back through JSON.
func runHealth(t *testing.T, script string, object any) health {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(object)
	if err != nil {
		t.Fatal(err)
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, u))
	if err := l.DoString(script); err != nil {
		t.Fatalf("script failed: %v", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("script returned %s, want a table", l.Get(-1).Type())
	}
	b, err := json.Marshal(fromLua(ret))
	if err != nil {
		t.Fatal(err)
	}
	var h health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	switch h.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
	default:
		t.Errorf("status %q is none of Argo CD's health codes", h.Status)
	}
	return h
}

// toLua converts an unstructured value as Argo CD's decodeValue does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

func fromLua(v lua.LValue) any {
	switch v := v.(type) {
	case *lua.LTable:
		m := map[string]any{}
		v.ForEach(func(k, item lua.LValue) { m[k.String()] = fromLua(item) })
		return m
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return float64(v)
	case lua.LBool:
		return bool(v)
	}
	return nil
}

type cond struct{ typ, status, reason, msg string }

func setConds(into *[]metav1.Condition, conds []cond) {
	for _, c := range conds {
		meta.SetStatusCondition(into, metav1.Condition{
			Type: c.typ, Status: metav1.ConditionStatus(c.status), Reason: c.reason, Message: c.msg,
		})
	}
}

// instance is an Instance at metadata.generation 2 as the agent leaves it.
func instance(suspend bool, observed int64, conds ...cond) *v1.Instance {
	i := &v1.Instance{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "Instance"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Spec:       v1.InstanceSpec{Host: "web.example", NodeName: "n1", Suspend: suspend},
	}
	i.Status.ObservedGeneration = observed
	setConds(&i.Status.Conditions, conds)
	return i
}

// settled are the conditions of an Instance whose doubts are cleared.
var settled = []cond{
	{v1.ConditionStartUncertain, "False", "Certain", "every start's outcome is known"},
	{v1.ConditionKillUnproven, "False", v1.ReasonProven, "no kill is left unproven"},
}

func with(extra ...cond) []cond { return append(append([]cond{}, settled...), extra...) }

func TestInstanceHealth(t *testing.T) {
	tests := map[string]struct {
		obj  *v1.Instance
		want health
	}{
		"just created": {
			obj:  instance(false, 0),
			want: health{"Progressing", "waiting for the node agent to report"},
		},
		"serving": {
			obj:  instance(false, 2, with(cond{v1.ConditionReady, "True", v1.ReasonReconciled, "generation 2 serves"})...),
			want: health{"Healthy", "generation 2 serves"},
		},
		"first generation starting": {
			obj: instance(false, 1, with(
				cond{v1.ConditionReconciling, "True", v1.ReasonProgressing, "waiting for a generation to serve"},
				cond{v1.ConditionReady, "False", v1.ReasonProgressing, "no generation serves yet"})...),
			want: health{"Progressing", "Reconciling (Progressing): waiting for a generation to serve"},
		},
		"swap under way": {
			obj: instance(false, 1, with(
				cond{v1.ConditionReconciling, "True", v1.ReasonSwapping, "generation 2 serves; generation 1 is retiring"},
				cond{v1.ConditionReady, "False", v1.ReasonSwapping, "generation 2 serves; generation 2 serves; generation 1 is retiring"})...),
			want: health{"Progressing", "Reconciling (Swapping): generation 2 serves; generation 1 is retiring"},
		},
		"spec changed, not yet observed": {
			obj:  instance(false, 1, with(cond{v1.ConditionReady, "True", v1.ReasonReconciled, "generation 1 serves"})...),
			want: health{"Progressing", "waiting for the node agent to observe generation 2"},
		},
		"kill unproven": {
			obj: instance(false, 2,
				cond{v1.ConditionKillUnproven, "True", string(v1.ReasonCgroupNotEmpty), "generation 1: cgroup still holds 2 processes"},
				cond{v1.ConditionStartUncertain, "False", "Certain", "every start's outcome is known"},
				cond{v1.ConditionReady, "False", v1.ConditionKillUnproven, "a retired generation is not proven gone"}),
			want: health{"Degraded", "KillUnproven (CgroupNotEmpty): generation 1: cgroup still holds 2 processes"},
		},
		"kill unproven while suspended and swapping": {
			obj: instance(true, 2,
				cond{v1.ConditionKillUnproven, "True", v1.ReasonProofTimedOut, "generation 1: proof timed out"},
				cond{v1.ConditionReconciling, "True", v1.ReasonSwapping, "generation 1 is retiring"}),
			want: health{"Degraded", "KillUnproven (ProofTimedOut): generation 1: proof timed out"},
		},
		"start uncertain": {
			obj: instance(false, 2,
				cond{v1.ConditionStartUncertain, "True", v1.ReasonQueuedJobMayRun, "generation 2: start job queued"},
				cond{v1.ConditionKillUnproven, "False", v1.ReasonProven, "no kill is left unproven"},
				cond{v1.ConditionReady, "False", v1.ConditionStartUncertain, "a start may or may not have run"}),
			want: health{"Degraded", "StartUncertain (QueuedJobMayRun): generation 2: start job queued"},
		},
		"stalled": {
			obj: instance(false, 2, with(
				cond{v1.ConditionStalled, "True", v1.ReasonSwapAborted, "generation 2 crashed at start"},
				cond{v1.ConditionReady, "False", v1.ReasonSwapAborted, "generation 2 crashed at start"})...),
			want: health{"Degraded", "Stalled (SwapAborted): generation 2 crashed at start"},
		},
		"suspended": {
			obj:  instance(true, 2, with(cond{v1.ConditionReady, "False", v1.ReasonSuspended, "suspended"})...),
			want: health{"Suspended", "suspended: every generation is retired"},
		},
		"suspending: generations retiring": {
			obj: instance(true, 1, with(
				cond{v1.ConditionReconciling, "True", v1.ReasonProgressing, "generation 1 is retiring"},
				cond{v1.ConditionReady, "False", v1.ReasonSuspended, "suspended"})...),
			want: health{"Suspended", "suspended; Reconciling (Progressing): generation 1 is retiring"},
		},
		"settled on a failure": {
			obj:  instance(false, 2, with(cond{v1.ConditionReady, "False", "Exited", "exited with code 3"})...),
			want: health{"Degraded", "Ready (Exited): exited with code 3"},
		},
		"ready unknown": {
			obj:  instance(false, 2, with(cond{v1.ConditionReady, "Unknown", "Probing", "no answer yet"})...),
			want: health{"Progressing", "waiting for Ready"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := runHealth(t, InstanceLua, tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health (-want,+got):\n%s", diff)
			}
		})
	}
}

func generation(retired bool, phase v1.GenerationPhase, conds ...cond) *v1.Generation {
	g := &v1.Generation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "Generation"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "shop", Generation: 1},
		Spec:       v1.GenerationSpec{Instance: "web", NodeName: "n1", Number: 2, Retired: retired},
	}
	g.Status.Phase = phase
	setConds(&g.Status.Conditions, conds)
	return g
}

var (
	prepared = cond{v1.ConditionPrepared, "True", "Prepared", "directories and socket ready"}
	running  = cond{v1.ConditionStarted, "True", v1.ReasonRunning, "running as pid 4242"}
)

func TestGenerationHealth(t *testing.T) {
	tests := map[string]struct {
		obj  *v1.Generation
		want health
	}{
		"just created": {
			obj:  generation(false, ""),
			want: health{"Progressing", "waiting for the node agent to report"},
		},
		"pending": {
			obj:  generation(false, v1.PhasePending),
			want: health{"Progressing", "Pending"},
		},
		"probing": {
			obj:  generation(false, v1.PhaseStarting, prepared, running, cond{v1.ConditionReady, "False", "Probing", "dial unix: connection refused"}),
			want: health{"Progressing", "Ready (Probing): dial unix: connection refused"},
		},
		"ready": {
			obj:  generation(false, v1.PhaseRunning, prepared, running, cond{v1.ConditionReady, "True", "ProbeSucceeded", "readiness probe succeeded"}),
			want: health{"Healthy", "readiness probe succeeded"},
		},
		"start may have run": {
			obj:  generation(false, v1.PhaseStarting, prepared, cond{v1.ConditionStarted, "Unknown", v1.ReasonMayHaveRun, "StartTransientUnit: no reply"}),
			want: health{"Degraded", "StartUncertain (MayHaveRun): StartTransientUnit: no reply"},
		},
		"launch refused": {
			obj:  generation(false, v1.PhaseFailed, prepared, cond{v1.ConditionStarted, "False", v1.ReasonLaunchRefused, "gate: memory tier over budget"}),
			want: health{"Degraded", "Failed (LaunchRefused): gate: memory tier over budget"},
		},
		"readiness timeout": {
			obj: generation(false, v1.PhaseFailed, prepared, running,
				cond{v1.ConditionReady, "False", v1.ReasonReadinessTimeout, "not ready within 30s"}),
			want: health{"Degraded", "Failed (ReadinessTimeout): not ready within 30s"},
		},
		"retiring": {
			obj:  generation(true, v1.PhaseRetiring, prepared, running),
			want: health{"Progressing", "retiring"},
		},
		"kill unproven": {
			obj: generation(true, v1.PhaseRetiring, prepared, running,
				cond{v1.ConditionTerminated, "False", string(v1.ReasonCgroupNotEmpty), "kill unproven: cgroup not empty"}),
			want: health{"Degraded", "KillUnproven (CgroupNotEmpty): kill unproven: cgroup not empty"},
		},
		"retired, proven gone": {
			obj: generation(true, v1.PhaseRetired, prepared, running,
				cond{v1.ConditionTerminated, "True", v1.ReasonProven, "stopped; unit inactive and cgroup seen empty"},
				cond{v1.ConditionReady, "False", "Retired", "generation retired"}),
			want: health{"Healthy", "retired; proven gone"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := runHealth(t, GenerationLua, tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health (-want,+got):\n%s", diff)
			}
		})
	}
}
