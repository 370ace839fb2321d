package join

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	armed := []Check{{Name: CheckStateRoot, Passed: true}}
	disarmed := []Check{{Name: CheckStateRoot, Message: "missing"}}
	type got struct {
		Mode      Mode
		Stage     Stage
		Accepting bool
	}
	tests := map[string]struct {
		facts      Facts
		want       got
		wantReason string // a part the reason must hold
	}{
		"not approved, armed": {
			facts:      Facts{Checks: armed},
			want:       got{ModeJoining, StageAwaitingApproval, false},
			wantReason: "spec.approved",
		},
		"not approved, not armed names the check": {
			facts:      Facts{Checks: disarmed},
			want:       got{ModeJoining, StageAwaitingApproval, false},
			wantReason: "StateRoot: missing",
		},
		"approved, not armed names the check": {
			facts:      Facts{Approved: true, Checks: disarmed},
			want:       got{ModeJoining, StageGuardNotArmed, false},
			wantReason: "StateRoot: missing",
		},
		"approved and armed hosts": {
			facts: Facts{Approved: true, Checks: armed},
			want:  got{ModeHosting, StageHosting, true},
		},
		"still hosting": {
			facts: Facts{Approved: true, Checks: armed, Hosted: true},
			want:  got{ModeHosting, StageHosting, true},
		},
		"approval withdrawn while hosting stops new work only": {
			facts:      Facts{Checks: armed, Hosted: true},
			want:       got{ModeJoining, StageApprovalRevoked, false},
			wantReason: "running Instances keep running",
		},
		"guard lost while hosting stops new work only": {
			facts:      Facts{Approved: true, Checks: disarmed, Hosted: true},
			want:       got{ModeJoining, StageGuardDisarmed, false},
			wantReason: "StateRoot: missing",
		},
		"approved and armed without the node's Lease does not host": {
			facts:      Facts{Approved: true, Checks: armed, LeaseNotHeld: "leases is forbidden"},
			want:       got{ModeJoining, StageLeaseNotHeld, false},
			wantReason: "leases is forbidden",
		},
		"not approved without the node's Lease names the Lease": {
			facts:      Facts{Checks: armed, LeaseNotHeld: "namespace not found"},
			want:       got{ModeJoining, StageLeaseNotHeld, false},
			wantReason: "namespace not found",
		},
		"approved with no checks does not host": {
			facts: Facts{Approved: true},
			want:  got{ModeJoining, StageGuardNotArmed, false},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.facts)
			if diff := cmp.Diff(tc.want, got{d.Mode, d.Stage, d.Accepting}); diff != "" {
				t.Errorf("Decide (-want,+got):\n%s", diff)
			}
			if !strings.Contains(d.Reason, tc.wantReason) {
				t.Errorf("reason %q does not hold %q", d.Reason, tc.wantReason)
			}
		})
	}
}
