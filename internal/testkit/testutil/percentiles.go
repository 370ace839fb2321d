package testutil

import (
	"math"
	"slices"
	"time"
)

// Percentiles are d's p50, p90 and p99 in seconds (nearest rank; d is
// sorted in place), zero for none.
func Percentiles(d []time.Duration) (p50, p90, p99 float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return d[max(i, 0)].Seconds()
	}
	return at(0.5), at(0.9), at(0.99)
}
