package endpoint

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestRunEnd(t *testing.T) {
	proven := outcome.Kill{Proven: true}
	running := outcome.Start{Kind: outcome.Running}
	type got struct {
		Result, Type, Reason string
		Code                 int
		Failed               bool
	}
	tests := map[string]struct {
		res  node.RunResult
		want got
	}{
		"exit 0": {node.RunResult{Start: running, Kill: proven, Exit: &outcome.Exit{Code: 0}},
			got{"succeeded", "Normal", "RunSucceeded", 0, false}},
		"exit 3": {node.RunResult{Start: running, Kill: proven, Exit: &outcome.Exit{Code: 3}},
			got{"failed", "Warning", "RunFailed", 3, false}},
		"killed by signal 9": {node.RunResult{Start: running, Kill: proven, Exit: &outcome.Exit{Signal: 9}},
			got{"failed", "Warning", "RunFailed", 137, false}},
		"caller went away": {node.RunResult{Start: running, Kill: proven, Stopped: true},
			got{"interrupted", "Warning", "RunInterrupted", 130, false}},
		"no exit record": {node.RunResult{Start: running, Kill: proven},
			got{"failed", "Warning", "RunFailed", 1, false}},
		"not started": {node.RunResult{Start: outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("no launch file")}},
			got{"notStarted", "Warning", "RunNotStarted", 0, true}},
		"end unproven": {node.RunResult{Start: running, Kill: outcome.Unproven(outcome.CgroupNotEmpty, errors.New("still 1 pid"))},
			got{"unproven", "Warning", "KillUnproven", 0, true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := runEnd(tc.res, "run-1", 2)
			g := got{o.result, o.eventType, o.reason, o.exit.ExitCode, o.failed != ""}
			if d := cmp.Diff(tc.want, g); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if o.exit.Name != "run-1" || o.exit.Generation != 2 {
				t.Errorf("exit names %+v", o.exit)
			}
		})
	}
}

func TestLogFilter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		q       agentapi.LogQuery
		want    logs.Filter
		wantErr bool
	}{
		"everything":         {q: agentapi.LogQuery{}, want: logs.Filter{Role: "run"}},
		"one generation":     {q: agentapi.LogQuery{Generation: 3}, want: logs.Filter{Role: "run", Generation: 3}},
		"since a duration":   {q: agentapi.LogQuery{Since: "10m"}, want: logs.Filter{Role: "run", Since: now.Add(-10 * time.Minute)}},
		"since a time":       {q: agentapi.LogQuery{Since: "2026-12-01T09:00:00Z"}, want: logs.Filter{Role: "run", Since: now.Add(-time.Hour)}},
		"a sidecar":          {q: agentapi.LogQuery{Role: "sidecar/cache"}, want: logs.Filter{Role: "sidecar", Sidecar: "cache"}},
		"seed":               {q: agentapi.LogQuery{Role: "seed"}, want: logs.Filter{Role: "seed"}},
		"bad since":          {q: agentapi.LogQuery{Since: "yesterday"}, wantErr: true},
		"negative since":     {q: agentapi.LogQuery{Since: "-5m"}, wantErr: true},
		"generation of seed": {q: agentapi.LogQuery{Role: "seed", Generation: 2}, wantErr: true},
		"a run's output":     {q: agentapi.LogQuery{Role: "cmd"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := logFilter(tc.q, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); err == nil && d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
