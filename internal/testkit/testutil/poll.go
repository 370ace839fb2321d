// Package testutil holds the helpers that the packages testing against a
// real API server share: polling, reading and changing Instances, loading
// config/samples, and talking HTTP over an instance's unix socket.
package testutil

import (
	"testing"
	"time"
)

// Eventually calls cond every interval until it holds, and fails t when
// limit passes first, with the last state cond reported.
func Eventually(t testing.TB, what string, limit, every time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(every)
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", limit, what, last)
}

// Succeeds is Eventually's condition for a check written as an error: it
// holds once f returns nil, and the last error is the state reported.
func Succeeds(f func() error) func() (bool, string) {
	return func() (bool, string) {
		if err := f(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
}
