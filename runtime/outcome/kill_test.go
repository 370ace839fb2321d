package outcome

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKillOf(t *testing.T) {
	cause := errors.New("cgroup.procs still lists 42")
	tests := map[string]struct {
		err    error
		proven bool
		reason KillReason
	}{
		"nil is proven":         {nil, true, ""},
		"marked reason":         {Unproven(NoDelegation, cause).Err(), false, NoDelegation},
		"marked reason wrapped": {fmt.Errorf("gen 4: %w", Unproven(Permission, cause).Err()), false, Permission},
		"mark without cause":    {Unproven(UnitActive, nil).Err(), false, UnitActive},
		"deadline":              {fmt.Errorf("wait empty: %w", context.DeadlineExceeded), false, ProofTimedOut},
		"cancelled":             {fmt.Errorf("wait empty: %w", context.Canceled), false, Cancelled},
		"unmarked":              {cause, false, CgroupNotEmpty},
		"mark beats context":    {Unproven(StopUnanswered, context.DeadlineExceeded).Err(), false, StopUnanswered},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k := KillOf(tc.err)
			if diff := cmp.Diff(tc.proven, k.Proven); diff != "" {
				t.Errorf("Proven (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reason, k.Reason); diff != "" {
				t.Errorf("Reason (-want,+got):\n%s", diff)
			}
			if tc.err != nil && !errors.Is(k.Err(), ErrKillUnproven) {
				t.Errorf("Err() is not ErrKillUnproven")
			}
		})
	}
}

func TestProvenKillHasNoError(t *testing.T) {
	if err := ProvenKill().Err(); err != nil {
		t.Errorf("ProvenKill().Err() = %v, want nil", err)
	}
}

func TestUnprovenKillMakesStartMayHaveRun(t *testing.T) {
	// A start that failed and whose kill was not proven may still be
	// running, even if the start itself was refused.
	err := fmt.Errorf("start failed: %w", errors.Join(
		Refused(errors.New("gate said no")),
		Unproven(ProofTimedOut, context.DeadlineExceeded).Err(),
	))
	if !MightHaveRun(err) {
		t.Errorf("MightHaveRun = false for a start with an unproven kill")
	}
}
