package systemdboot

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkBoot measures Start (clone to a manager answering on the bus);
// teardown is timed apart and reported as close-ms/op.
func BenchmarkBoot(b *testing.B) {
	var closing time.Duration
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		s, err := Start(ctx, Options{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t0 := time.Now()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "close-ms/op")
}

// BenchmarkStartTransientUnit is the raw cost of one StartTransientUnit
// of /bin/sleep through the namespace's bus until its job is done; the
// stop is not timed.
func BenchmarkStartTransientUnit(b *testing.B) {
	ctx := context.Background()
	s := Boot(b)
	c, err := s.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		unit := fmt.Sprintf("systemdboot-bench-%d.service", i)
		if res, err := startSleep(ctx, c, unit); err != nil || res != "done" {
			b.Fatalf("start %s: %q %v", unit, res, err)
		}
		b.StopTimer()
		if res, err := stopUnit(ctx, c, unit); err != nil || res != "done" {
			b.Fatalf("stop %s: %q %v", unit, res, err)
		}
		b.StartTimer()
	}
}
