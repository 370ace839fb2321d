package prepare

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
)

// BenchmarkPrepare prepares a run role (generation 1) with its control and
// log listeners, then closes them, b.N times. The token is minted in the
// first round only, as on a real node. p50 and p99 are of Prepare alone.
// The run root sits on the disk (as /run on this machine) and on tmpfs
// (/dev/shm, as /run on a systemd host).
func BenchmarkPrepare(b *testing.B) {
	b.Run("runroot=disk", func(b *testing.B) { benchPrepare(b, os.TempDir()) })
	b.Run("runroot=tmpfs", func(b *testing.B) { benchPrepare(b, "/dev/shm") })
}

func benchPrepare(b *testing.B, runParent string) {
	f := newFixtureAt(b, runParent)
	req := f.request(layout.RoleApp, 1)
	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		res, err := Prepare(req)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if res.Control == nil || res.Logs == nil {
			b.Fatalf("listeners missing: %v", res.Warnings)
		}
		b.StopTimer()
		res.Close()
		b.StartTimer()
	}
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
