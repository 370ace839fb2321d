package testutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTallySince(t *testing.T) {
	tests := map[string]struct {
		before, now, want Tally
	}{
		"nothing before": {
			now:  Tally{OK: 3, Failed: 1, Bodies: map[string]int64{"g1": 3}},
			want: Tally{OK: 3, Failed: 1, Bodies: map[string]int64{"g1": 3}},
		},
		"a window in which a new answer came": {
			before: Tally{OK: 5, Bodies: map[string]int64{"g1": 5}},
			now:    Tally{OK: 9, Failed: 2, Bodies: map[string]int64{"g1": 7, "g2": 2}},
			want:   Tally{OK: 4, Failed: 2, Bodies: map[string]int64{"g1": 2, "g2": 2}},
		},
		"an answer no longer given is left out": {
			before: Tally{OK: 5, Bodies: map[string]int64{"g1": 5}},
			now:    Tally{OK: 8, Bodies: map[string]int64{"g1": 5, "g2": 3}},
			want:   Tally{OK: 3, Bodies: map[string]int64{"g2": 3}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.now.Since(tc.before)); d != "" {
				t.Errorf("Since (-want,+got):\n%s", d)
			}
		})
	}
}
