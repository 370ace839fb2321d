package cgroups

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkKillAndEmpty times KillAndEmpty of a generation holding 101
// processes (a shell fork tree), from the first kill to the proof. Each
// iteration uses a fresh g<n>; spawning is outside the timer. p50/p99 are
// reported from the iterations' own durations; 1proc is the fixed cost,
// 100procs-v2 the same kill on the pure v2 path (private namespace).
func BenchmarkKillAndEmpty(b *testing.B) {
	b.Run("100procs", func(b *testing.B) { benchKill(b, treeScript, 101) })
	// One process: the fixed cost of a kill and its proof.
	b.Run("1proc", func(b *testing.B) { benchKill(b, "exec sleep 1000", 1) })
	if os.Getenv(envV2) == "1" {
		return
	}
	// The same on the v2 path, run in a private cgroup2 namespace; its
	// figures are the inner run's, reported here.
	b.Run("100procs-v2", func(b *testing.B) {
		out, err := runInV2(b, "-test.run=^$", "-test.bench=^BenchmarkKillAndEmpty$/^100procs$",
			fmt.Sprintf("-test.benchtime=%dx", b.N))
		if err != nil {
			b.Fatalf("v2 run: %v\n%s", err, out)
		}
		for _, unit := range []string{"p50-ms", "p99-ms", "max-ms"} {
			m := regexp.MustCompile(`([0-9.]+) ` + unit).FindSubmatch(out)
			if m == nil {
				b.Fatalf("no %s in the v2 run:\n%s", unit, out)
			}
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			b.ReportMetric(v, unit)
		}
	})
}

func benchKill(b *testing.B, script string, procs int) {
	cfg := testConfig(b)
	m := newManager(b, cfg, "bench", Tier{Pids: 4096})
	var took []time.Duration
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		g, err := m.CreateGeneration(int64(i+1), Tier{Pids: 1024})
		if err != nil {
			b.Fatal(err)
		}
		h := spawnIn(b, m, g, script, procs)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		b.StartTimer()
		p := m.KillAndEmpty(ctx, g)
		b.StopTimer()
		took = append(took, time.Since(start))
		cancel()
		if !p.Proven {
			b.Fatalf("unproven: %v", p.Error())
		}
		_ = h.cmd.Wait()
		if err := m.RemoveChild(g); err != nil {
			b.Fatal(err)
		}
	}
	report(b, took)
}

// BenchmarkPlace is the cost of placing one process: a running process is
// moved between two children, one Place per iteration.
func BenchmarkPlace(b *testing.B) {
	cfg := testConfig(b)
	m := newManager(b, cfg, "place", Tier{})
	g1, _ := m.CreateGeneration(1, Tier{})
	g2, _ := m.CreateGeneration(2, Tier{})
	cmd := exec.Command("/bin/sleep", "1000")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	children := []string{g1, g2}
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := m.Place(cmd.Process.Pid, children[i%2]); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	report(b, took)
}

func report(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	q := func(f float64) float64 {
		return float64(took[min(len(took)-1, int(f*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}
