package testutil

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Step is one step of a suite whose steps build on each other's state.
type Step struct {
	Name string
	Run  func(t *testing.T)
}

// StepTimesEnv names a file each step's duration is appended to, so a
// package run without -v (make test) still leaves where its time went.
const StepTimesEnv = "UNITLET_STEP_TIMES"

// RunSteps runs steps in order as subtests, printing each one's duration
// after prefix, and stops at the first that fails: the later ones need
// its state.
func RunSteps(t *testing.T, prefix string, steps []Step) {
	t.Helper()
	for _, s := range steps {
		started := time.Now()
		ok := t.Run(s.Name, s.Run)
		line := fmt.Sprintf("%s: %-55s %s", prefix, s.Name, time.Since(started).Round(100*time.Millisecond))
		fmt.Println(line)
		recordStepTime(line)
		if !ok {
			t.Fatalf("%q failed; the later steps need its state", s.Name)
		}
	}
}

// Report prints each line of text after prefix and records it beside
// the step times: what a suite measured that its steps' times do not
// show (where the time of its setup or its guest's CPU went).
func Report(prefix, text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		line := prefix + ": " + l
		fmt.Println(line)
		recordStepTime(line)
	}
}

func recordStepTime(line string) {
	p := os.Getenv(StepTimesEnv)
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return // a record for people; a test never fails for it
	}
	defer f.Close()
	_, _ = fmt.Fprintln(f, line)
}
