package testutil

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// Replace's promise is an order between two processes, which conditions
// (second resolution, written after the fact) cannot show. These read it
// to the microsecond from the node's own records.

// ReadFile reads one file of the node: os.ReadFile here, or through ssh
// in the node VM.
type ReadFile func(path string) ([]byte, error)

// ExitRecord is how and when generation n's main process ended, as its
// shim or systemd's ExecStopPost wrote it.
func ExitRecord(read ReadFile, li layout.Instance, n int64) (record.Exit, error) {
	var e record.Exit
	err := readRecord(read, li, n, record.ExitSuffix, &e)
	return e, err
}

// HandedOffAt is when the direct backend handed generation n's start off
// (its start record is written first): nothing of it ran before.
func HandedOffAt(read ReadFile, li layout.Instance, n int64) (time.Time, error) {
	var s record.Start
	if err := readRecord(read, li, n, record.StartSuffix, &s); err != nil {
		return time.Time{}, err
	}
	return s.At, nil
}

func readRecord(read ReadFile, li layout.Instance, n int64, suffix string, into any) error {
	p, err := li.Generation(n)
	if err != nil {
		return err
	}
	path := filepath.Join(li.ExitDir(), record.Name(p, suffix))
	b, err := read(path)
	if err != nil {
		return fmt.Errorf("generation %d's %s record: %w", n, suffix, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// CheckReplaceOrder fails t unless the old generation's main process
// ended before the new one's start (both to the microsecond), and prints
// the gap.
func CheckReplaceOrder(t testing.TB, name string, oldExited, newStarted time.Time) {
	t.Helper()
	if oldExited.IsZero() || newStarted.IsZero() || !oldExited.Before(newStarted) {
		t.Fatalf("Replace %s: the old generation's main process ended at %s, the new one started at %s",
			name, oldExited.Format(time.RFC3339Nano), newStarted.Format(time.RFC3339Nano))
	}
	fmt.Printf("Replace %s: the new generation started %s after the old one's main process ended\n",
		name, newStarted.Sub(oldExited).Round(time.Microsecond))
}
