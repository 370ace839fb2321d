package testutil

import "fmt"

// Tally is what a Load counted up to a moment: read at both edges of a
// window (a swap, an eviction), Since counts the window apart from what
// came before and after it.
type Tally struct {
	OK, Failed int64
	Bodies     map[string]int64
}

// Tally reads what l counted so far. OK is the sum of the answers by
// body, so both agree whatever a worker was doing meanwhile.
func (l *Load) Tally() Tally {
	t := Tally{Failed: l.Failed.Load(), Bodies: l.Bodies()}
	for _, n := range t.Bodies {
		t.OK += n
	}
	return t
}

// Since is what was counted after before, up to t.
func (t Tally) Since(before Tally) Tally {
	d := Tally{OK: t.OK - before.OK, Failed: t.Failed - before.Failed, Bodies: map[string]int64{}}
	for body, n := range t.Bodies {
		if n -= before.Bodies[body]; n != 0 {
			d.Bodies[body] = n
		}
	}
	return d
}

// Total is every request counted.
func (t Tally) Total() int64 { return t.OK + t.Failed }

func (t Tally) String() string {
	return fmt.Sprintf("%d requests, %d failed, by answer: %v", t.Total(), t.Failed, t.Bodies)
}
