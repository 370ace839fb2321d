package units

import (
	"context"
	"testing"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// BenchmarkSystemdStart compares the backend's Start (slice check, start,
// job wait, first observation) with a raw StartTransientUnit of the same
// unit and properties waiting for its job. Stops are not timed.
func BenchmarkSystemdStart(b *testing.B) {
	env := newSDEnv(b)
	ctx := context.Background()
	be := env.backend(b, 0x7fffffff)
	c := env.conn(b)

	b.Run("backend", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			p := env.proc(b, "bench", int64(i+1), "/bin/sleep", "1000")
			b.StartTimer()
			if got := be.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
				b.Fatalf("start: %v (%v)", got.Kind, got.Cause)
			}
			b.StopTimer()
			if err := be.Stop(ctx, p); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("raw", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			p := env.proc(b, "rawbench", int64(i+1), "/bin/sleep", "1000")
			props, err := be.serviceProps(Spec{Slot: p})
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				// The same slice the backend would use, made once.
				if err := be.ensureSlice(ctx, c, p.Instance(), Spec{}.Parent); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			done := make(chan string, 1)
			if _, err := c.StartTransientUnitContext(ctx, p.UnitName(), "fail", props, done); err != nil {
				b.Fatal(err)
			}
			if r := <-done; r != "done" {
				b.Fatalf("job %q", r)
			}
			b.StopTimer()
			if err := stopUnit(ctx, c, p.UnitName()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
