package testutil

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	cases := map[string]struct {
		in   []time.Duration
		want [3]float64
	}{
		"none":        {},
		"one":         {in: ms(7), want: [3]float64{0.007, 0.007, 0.007}},
		"unsorted 10": {in: ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), want: [3]float64{0.005, 0.009, 0.010}},
		"30, one slow": {in: append(ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 900*time.Millisecond),
			want: [3]float64{0.001, 0.001, 0.9}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p50, p90, p99 := Percentiles(tc.in)
			if diff := cmp.Diff(tc.want, [3]float64{p50, p90, p99}); diff != "" {
				t.Errorf("percentiles (-want,+got):\n%s", diff)
			}
		})
	}
}
