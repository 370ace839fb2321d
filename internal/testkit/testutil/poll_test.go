package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder keeps what Fatalf was told instead of ending the test, so
// that a timeout can be observed.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	rec := &fatalRecorder{}
	Eventually(rec, "third call", 5*time.Second, time.Millisecond, func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprint(calls)
	})
	if rec.fatal != "" || calls != 3 {
		t.Fatalf("calls=%d fatal=%q, want 3 calls and no failure", calls, rec.fatal)
	}
}

func TestEventuallyFailsWithLastState(t *testing.T) {
	rec := &fatalRecorder{}
	Eventually(rec, "never", 20*time.Millisecond, time.Millisecond, func() (bool, string) { return false, "still no" })
	if !strings.Contains(rec.fatal, "waiting for never; last: still no") {
		t.Fatalf("fatal = %q, want the wait and the last state named", rec.fatal)
	}
}

func TestSucceedsReportsTheLastError(t *testing.T) {
	calls := 0
	rec := &fatalRecorder{}
	Eventually(rec, "a nil error", 5*time.Second, time.Millisecond, Succeeds(func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	}))
	if rec.fatal != "" || calls != 3 {
		t.Fatalf("calls=%d fatal=%q, want 3 calls and no failure", calls, rec.fatal)
	}
	Eventually(rec, "never", 20*time.Millisecond, time.Millisecond, Succeeds(func() error { return errors.New("still broken") }))
	if !strings.Contains(rec.fatal, "waiting for never; last: still broken") {
		t.Fatalf("fatal = %q, want the last error named", rec.fatal)
	}
}
