package units

import (
	"context"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestSlotStartsAgainAfterItsRunEnded: a slot whose unit name comes back
// (a sidecar started again, a seed run again) starts again once its last
// run ended and was proven gone, however that run ended: systemd keeps a
// failed unit loaded under the name until it is reset.
func TestSlotStartsAgainAfterItsRunEnded(t *testing.T) {
	tests := map[string]struct {
		script string
	}{
		"after a failure":    {script: "exit 3"},
		"after a clean exit": {script: "exit 0"},
		"after a signal":     {script: "kill -KILL $$"},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := be.new(t, 10*time.Second)
		sidecar := func(argv ...string) layout.Slot {
			return makeSlot(t, be.lay, "again", func(inst layout.Instance) (layout.Slot, error) {
				return inst.Sidecar(string(rune('a' + i)))
			}, argv...)
		}
		p := sidecar("/bin/sh", "-c", "sleep 0.1; "+tc.script)
		if got := b.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
			t.Fatalf("first start: %v (%v)", got.Kind, got.Cause)
		}
		waitGone(ctx, t, b, p)
		if k := b.Prove(ctx, p); !k.Proven {
			t.Fatalf("prove the first run gone: %v", k.Err())
		}

		p = sidecar("/bin/sleep", "1000")
		got := b.Start(ctx, Spec{Slot: p})
		if got.Kind != outcome.Running {
			t.Fatalf("second start: %v (%v)", got.Kind, got.Cause)
		}
		t.Cleanup(func() { b.Prove(context.Background(), p) })
		st, err := b.Observe(ctx, p)
		if err != nil || st.ActiveState != "active" || st.InvocationID != got.InvocationID {
			t.Errorf("second run: %+v %v, want active with invocation %s", st, err, got.InvocationID)
		}
	})
}
