package controllers

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLogChange(t *testing.T) {
	down := errors.New("connection refused")
	full := errors.New("disk full")
	tests := map[string]struct {
		errs []error
		want []bool // logged, per error in turn
	}{
		"a repeated error is logged once": {
			errs: []error{down, down, down},
			want: []bool{true, false, false},
		},
		"a success is not logged": {
			errs: []error{nil, nil},
			want: []bool{false, false},
		},
		"a second outage with the same error is logged again": {
			errs: []error{down, down, nil, down, down},
			want: []bool{true, false, false, true, false},
		},
		"a new error is logged": {
			errs: []error{down, full, full},
			want: []bool{true, true, false},
		},
		"an error back after another is logged again": {
			errs: []error{down, full, down},
			want: []bool{true, true, true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var l logChange
			got := make([]bool, 0, len(tc.errs))
			for _, err := range tc.errs {
				got = append(got, l.changed(err))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("logged (-want,+got):\n%s", diff)
			}
		})
	}
}
