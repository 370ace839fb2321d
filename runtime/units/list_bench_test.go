package units

import (
	"context"
	"fmt"
	"testing"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// BenchmarkList compares listing a whole node of 32 running Instances
// (List) with listing one of them (ListInstance), on the direct backend:
// what a reconcile of a suspended or deleted Instance pays to find its
// sidecars and to prove its parent empty.
func BenchmarkList(b *testing.B) {
	env := newDEnv(b)
	ctx := context.Background()
	be := env.backend(b, 1<<40)
	const instances = 32
	for i := range instances {
		p := makeProc(b, env.lay, fmt.Sprintf("list%02d", i), 1, "/bin/sleep", "1000")
		if got := be.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
			b.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		b.Cleanup(func() { be.Prove(context.Background(), p) })
	}
	inst, err := env.lay.Instance("ns1", "list07")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("node", func(b *testing.B) {
		for b.Loop() {
			if sts, err := be.List(ctx); err != nil || len(sts) != instances {
				b.Fatalf("List: %d units, %v", len(sts), err)
			}
		}
	})
	b.Run("instance", func(b *testing.B) {
		for b.Loop() {
			if sts, err := be.ListInstance(ctx, inst); err != nil || len(sts) != 1 {
				b.Fatalf("ListInstance: %d units, %v", len(sts), err)
			}
		}
	})
}
