package join

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArmed(t *testing.T) {
	tests := map[string]struct {
		checks      []Check
		wantArmed   bool
		wantFailing string
	}{
		"all pass": {
			checks:    []Check{{Name: "A", Passed: true}, {Name: "B", Passed: true}},
			wantArmed: true,
		},
		"one fails and is named": {
			checks:      []Check{{Name: "A", Passed: true}, {Name: "B", Message: "missing"}},
			wantFailing: "B: missing",
		},
		"every failing check is named in order": {
			checks:      []Check{{Name: "A", Message: "x"}, {Name: "B", Passed: true}, {Name: "C", Message: "y"}},
			wantFailing: "A: x; C: y",
		},
		"no checks is not armed": {
			wantFailing: "no guard check ran",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			armed, failing := Armed(tc.checks)
			if diff := cmp.Diff([]any{tc.wantArmed, tc.wantFailing}, []any{armed, failing}); diff != "" {
				t.Errorf("Armed (-want,+got):\n%s", diff)
			}
		})
	}
}
