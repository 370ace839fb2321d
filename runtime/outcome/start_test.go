package outcome

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKindOfAndMayHaveRun(t *testing.T) {
	base := errors.New("dial: connection reset")
	tests := map[string]struct {
		err     error
		kind    StartKind
		mayHave bool
	}{
		"nil is a start that succeeded": {nil, Running, true},
		"unmarked error proves nothing": {base, MayHaveRun, true},
		"refused":                       {Refused(base), NotStarted, false},
		"refused wrapped twice": {
			fmt.Errorf("gen 3: %w", fmt.Errorf("start: %w", Refused(base))), NotStarted, false,
		},
		"uncertain":                       {Uncertain(base), MayHaveRun, true},
		"queued job":                      {Queued(base), QueuedJobMayRun, true},
		"queued beats uncertain":          {Uncertain(Queued(base)), QueuedJobMayRun, true},
		"uncertain beats refusal":         {Uncertain(fmt.Errorf("x: %w", Refused(base))), MayHaveRun, true},
		"refused over an uncertain cause": {Refused(Uncertain(base)), MayHaveRun, true},
		"refused but kill unproven": {
			errors.Join(Refused(base), Unproven(CgroupNotEmpty, nil).Err()), MayHaveRun, true,
		},
		"queued in a joined error": {errors.Join(Refused(base), Queued(base)), QueuedJobMayRun, true},
		"exited before observed": {
			Start{Kind: ExitedBeforeObserved, Unit: "u.service"}.Err(), ExitedBeforeObserved, true,
		},
		"exited before observed with cause, wrapped": {
			fmt.Errorf("gen 2: %w", Start{Kind: ExitedBeforeObserved, Cause: base}.Err()), ExitedBeforeObserved, true,
		},
		"exited beats refusal": {
			errors.Join(Refused(base), Start{Kind: ExitedBeforeObserved, Unit: "u"}.Err()), ExitedBeforeObserved, true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.kind, KindOf(tc.err)); diff != "" {
				t.Errorf("KindOf (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.mayHave, MightHaveRun(tc.err)); diff != "" {
				t.Errorf("MightHaveRun (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestMarksKeepTextAndIs(t *testing.T) {
	cause := fmt.Errorf("open launch file: %w", fs.ErrNotExist)
	tests := map[string]struct {
		err error
	}{
		"refused":   {Refused(cause)},
		"uncertain": {Uncertain(cause)},
		"queued":    {Queued(cause)},
		"start err": {Start{Kind: MayHaveRun, Cause: cause}.Err()},
		"exited":    {Start{Kind: ExitedBeforeObserved, Cause: cause}.Err()},
		"kill":      {Unproven(ProofTimedOut, cause).Err()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(cause.Error(), tc.err.Error()); diff != "" {
				t.Errorf("text (-want,+got):\n%s", diff)
			}
			if !errors.Is(fmt.Errorf("outer: %w", tc.err), fs.ErrNotExist) {
				t.Errorf("errors.Is(fs.ErrNotExist) lost through the mark")
			}
		})
	}
}

func TestStartValue(t *testing.T) {
	cause := errors.New("boom")
	tests := map[string]struct {
		start   Start
		mayHave bool
		errNil  bool
		kind    StartKind
	}{
		"zero value claims nothing": {Start{}, true, false, MayHaveRun},
		"running":                   {Start{Kind: Running, InvocationID: "ab", MainPID: 7}, true, true, Running},
		"not started":               {Start{Kind: NotStarted, Cause: cause}, false, false, NotStarted},
		"not started without cause": {Start{Kind: NotStarted, Unit: "u"}, false, false, NotStarted},
		"queued":                    {Start{Kind: QueuedJobMayRun, Job: "/job/1", Cause: cause}, true, false, QueuedJobMayRun},
		"exited":                    {Start{Kind: ExitedBeforeObserved, Unit: "u"}, true, false, ExitedBeforeObserved},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.mayHave, tc.start.MayHaveRun()); diff != "" {
				t.Errorf("MightHaveRun (-want,+got):\n%s", diff)
			}
			err := tc.start.Err()
			if diff := cmp.Diff(tc.errNil, err == nil); diff != "" {
				t.Errorf("Err()==nil (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.kind, KindOf(err)); diff != "" {
				t.Errorf("KindOf(Err()) (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExitedText(t *testing.T) {
	err := Start{Kind: ExitedBeforeObserved, Unit: "unitlet-a-b-g1.service"}.Err()
	if diff := cmp.Diff("unitlet-a-b-g1.service exited before it was observed", err.Error()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if !errors.Is(err, ErrExitedBeforeObserved) {
		t.Errorf("not ErrExitedBeforeObserved")
	}
}

func TestStartKindString(t *testing.T) {
	tests := map[string]struct {
		kind StartKind
	}{
		"MayHaveRun":           {MayHaveRun},
		"NotStarted":           {NotStarted},
		"QueuedJobMayRun":      {QueuedJobMayRun},
		"Running":              {Running},
		"ExitedBeforeObserved": {ExitedBeforeObserved},
		"StartKind(99)":        {StartKind(99)},
	}
	for want, tc := range tests {
		t.Run(want, func(t *testing.T) {
			if diff := cmp.Diff(want, tc.kind.String()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
