package prepare

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTimingsKeysAndValues(t *testing.T) {
	tm := Timings{Steps: []Step{{StepDirs, time.Millisecond}, {StepEnv, 2 * time.Millisecond}}, Total: 3 * time.Millisecond}
	want := []any{StepDirs, time.Millisecond, StepEnv, 2 * time.Millisecond, "total", 3 * time.Millisecond}
	if d := cmp.Diff(want, tm.KeysAndValues()); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
