package node

import (
	"context"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestOOMKilledOnTheDirectBackend: on this host's cgroups, a generation
// whose app allocates far beyond its tier is OOM-killed by the kernel;
// once it ended, Observe reads the kill and the limit from its cgroup.
// A serving generation beside it shows in Usage with its tier's limit.
func TestOOMKilledOnTheDirectBackend(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	serving := e.appRequest("usage", 1)
	e.retireAtEnd(t, serving.Ref)
	if got := e.node.Start(ctx, serving); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, e.node, serving.Ref)
	usage := e.node.Usage(ctx)
	if len(usage) != 1 || usage[0].Name != "usage" || usage[0].Generations != 1 ||
		usage[0].MemoryLimitBytes != serving.Tier.MemoryBytes || usage[0].MemoryWorkingSetBytes == 0 || usage[0].CPUUsageNanos == 0 {
		t.Errorf("usage of the serving generation = %+v, want its limit, a working set and CPU time", usage)
	}

	hungry := e.appRequest("hungry", 1)
	hungry.Command, hungry.Args = []string{"/usr/bin/dd"}, []string{"if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"}
	hungry.Tier = cgroups.Tier{MemoryBytes: 32 << 20, Pids: 64}
	hungry.Parent = hungry.Tier
	e.retireAtEnd(t, hungry.Ref)
	if got := e.node.Start(ctx, hungry); !got.Start.MayHaveRun() {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	var st State
	for {
		var err error
		if st, err = e.node.Observe(ctx, hungry.Ref); err != nil {
			t.Fatal(err)
		}
		if st.Exit != nil && !st.Populated {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the allocating app never ended: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if st.OOM == nil || st.OOM.Kills < 1 || st.OOM.MemoryLimitBytes != 32<<20 {
		t.Errorf("OOM of the ended app = %+v (exit %+v), want at least one kill at a 32Mi limit", st.OOM, st.Exit)
	}
}
