package units

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestJudgeJob: what a start job's result and the first look after it
// prove.
func TestJudgeJob(t *testing.T) {
	running := Status{Loaded: true, ActiveState: "active", SubState: "running", MainPID: 42, InvocationID: "ab"}
	exited := Status{Loaded: true, ActiveState: "failed", SubState: "failed", InvocationID: "ab",
		Exit: &outcome.Exit{Result: "exit-code", Code: 7}}
	tests := map[string]struct {
		result  string
		st      Status
		want    outcome.StartKind
		wantErr string
	}{
		"done and running": {result: "done", st: running, want: outcome.Running},
		"done, then gone": {result: "done", st: exited, want: outcome.ExitedBeforeObserved,
			wantErr: "exited before it was observed"},
		"done, its main process exited while ExecStopPost runs": {result: "done",
			st:   Status{Loaded: true, ActiveState: "deactivating", SubState: "stop-post", InvocationID: "ab", Exit: &outcome.Exit{Result: "exit-code", Code: 1}},
			want: outcome.ExitedBeforeObserved, wantErr: "exited before it was observed"},
		"failed before exec (systemd's own exit code)": {result: "failed",
			st:   Status{Loaded: true, ActiveState: "failed", InvocationID: "ab", Exit: &outcome.Exit{Result: "exit-code", Code: 203}},
			want: outcome.NotStarted, wantErr: "did not exec (status 203)"},
		"failed with the app's own exit code": {result: "failed", st: exited, want: outcome.MayHaveRun,
			wantErr: `job result "failed"`},
		"timed out":  {result: "timeout", st: running, want: outcome.MayHaveRun, wantErr: `job result "timeout"`},
		"canceled":   {result: "canceled", st: Status{}, want: outcome.MayHaveRun, wantErr: `job result "canceled"`},
		"dependency": {result: "dependency", st: Status{Loaded: true, ActiveState: "inactive"}, want: outcome.MayHaveRun, wantErr: `job result "dependency"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := judgeJob("u.service", tc.result, tc.st)
			if diff := cmp.Diff(tc.want.String(), got.String()); diff != "" {
				t.Errorf("kind (-want,+got):\n%s", diff)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestSystemdStartsOverAFailedUnit: a slot whose last run failed and was
// only seen gone, not proven (the proof would have reset it), keeps its
// failed unit loaded under its name. The start is refused with
// UnitExists, resets the name and is sent again.
func TestSystemdStartsOverAFailedUnit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	p := env.proc(t, "overfailed", 1, "/bin/sh", "-c", "sleep 0.1; exit 3")
	first := b.Start(ctx, Spec{Slot: p})
	if first.Kind != outcome.Running {
		t.Fatalf("first start: %v (%v)", first.Kind, first.Cause)
	}
	if st := waitGone(ctx, t, b, p); st.ActiveState != "failed" {
		t.Fatalf("the first run ended %s, want failed (loaded under its name)", st.ActiveState)
	}
	p = env.proc(t, "overfailed", 1, "/bin/sleep", "1000")
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	got := b.Start(ctx, Spec{Slot: p})
	if got.Kind != outcome.Running || got.InvocationID == first.InvocationID {
		t.Fatalf("second start: %v (%v), invocation %s after %s", got.Kind, got.Cause, got.InvocationID, first.InvocationID)
	}
	if st, err := b.Observe(ctx, p); err != nil || st.ActiveState != "active" || st.InvocationID != got.InvocationID {
		t.Errorf("second run: %+v %v, want active with invocation %s", st, err, got.InvocationID)
	}
}
