package units

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// benchPaces are the ways starts arrive in BenchmarkDirectStart: "rest"
// leaves the node idle for a moment between starts (untimed), as when
// Instances are applied one by one; "burst" starts again as soon as the
// last start was killed; "pair" is bursts of two starts (no longer than
// the warm pool) with a quiet moment between them, which is when a refill
// may run without slowing a start. Every start execs the unitlet binary twice
// (shim, trampoline), each exec tens of milliseconds of CPU in package
// init on this VM, so a burst keeps both cores busy with the start-ups
// of earlier starts (docs/reports/benchmarks.md).
var benchPaces = []struct {
	name  string
	pause time.Duration
	every int // the pause comes before every every-th start
}{{"rest", 100 * time.Millisecond, 1}, {"burst", 0, 1}, {"pair", 300 * time.Millisecond, 2}}

// BenchmarkDirectStart compares the direct backend's Start (fresh child
// cgroup, start record, job to a warm shim, shim places itself,
// trampoline exec'd, pid record, report, first look at the exit record)
// with a raw fork/exec of the same trampoline command into a fresh child
// cgroup (created, started, placed by the parent: v1 has no
// CLONE_INTO_CGROUP). Stops and pauses are not timed.
//
// UNITLET_SHIM_BINARY=<path to unitlet-shim> runs both arms with the
// binary the agent uses (`make build`), not this test binary: the figure
// a node sees.
func BenchmarkDirectStart(b *testing.B) {
	env := newDEnv(b)
	if exe := os.Getenv("UNITLET_SHIM_BINARY"); exe != "" {
		env.exe = exe
	}
	ctx := context.Background()
	be := env.backend(b, 1<<40)
	// Generations are never reused: each start gets the next, across
	// the benchmark's repeated runs.
	var gen int64
	startKill := func(b *testing.B) {
		b.StopTimer()
		gen++
		p := makeProc(b, env.lay, "bench", gen, "/bin/sleep", "1000")
		b.StartTimer()
		if got := be.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
			b.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		b.StopTimer()
		if err := be.Kill(ctx, p); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	p0 := makeProc(b, env.lay, "rawbench", 1, "/bin/sleep", "1000")
	inst := p0.Instance()
	m, err := be.Manager(inst)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.EnsureParent(cgroups.Tier{}); err != nil {
		b.Fatal(err)
	}
	rawStart := func(b *testing.B) {
		b.StopTimer()
		gen++
		p := makeProc(b, env.lay, "rawbench", gen, "/bin/sleep", "1000")
		b.StartTimer()
		child, err := m.CreateGeneration(p.Generation(), cgroups.Tier{})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(env.exe, "exec", "--launch", filepath.Join(inst.PrivateDir(), p.LaunchFile()), "--log-socket", p.LogSocket())
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := m.Place(cmd.Process.Pid, child); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if pr := m.KillAndEmpty(ctx, child); !pr.Proven {
			b.Fatal(pr.Error())
		}
		_ = cmd.Wait()
		b.StartTimer()
	}
	// A node that has started anything holds warm shims: so does this
	// one before the first timed start.
	startKill(b)
	for _, pace := range benchPaces {
		for _, arm := range []struct {
			name  string
			start func(*testing.B)
		}{{"backend", startKill}, {"raw", rawStart}} {
			b.Run(pace.name+"/"+arm.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if i%pace.every == 0 {
						b.StopTimer()
						time.Sleep(pace.pause)
						b.StartTimer()
					}
					arm.start(b)
				}
			})
		}
	}
}
