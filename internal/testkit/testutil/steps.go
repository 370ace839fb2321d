package testutil

import (
	"fmt"
	"testing"
	"time"
)

// Step is one step of a suite whose steps build on each other's state.
type Step struct {
	Name string
	Run  func(t *testing.T)
}

// RunSteps runs steps in order as subtests, printing each one's duration
// after prefix, and stops at the first that fails: the later ones need
// its state.
func RunSteps(t *testing.T, prefix string, steps []Step) {
	t.Helper()
	for _, s := range steps {
		started := time.Now()
		ok := t.Run(s.Name, s.Run)
		fmt.Printf("%s: %-55s %s\n", prefix, s.Name, time.Since(started).Round(100*time.Millisecond))
		if !ok {
			t.Fatalf("%q failed; the later steps need its state", s.Name)
		}
	}
}
