package units

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestList: a backend of its own, as after an agent restart, lists every
// unit; ListInstance lists one Instance's units and no other's.
func TestList(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := be.new(t, 5*time.Second)
			byInst := map[string]map[string]string{}
			for _, u := range []struct {
				name string
				n    int64
			}{{"list", 1}, {"list", 2}, {"list-other", 1}} {
				p := makeProc(t, be.lay, u.name, u.n, "/bin/sleep", "1000")
				got := b.Start(ctx, Spec{Slot: p})
				if got.Kind != outcome.Running {
					t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
				}
				t.Cleanup(func() { b.Prove(context.Background(), p) })
				if byInst[u.name] == nil {
					byInst[u.name] = map[string]string{}
				}
				byInst[u.name][p.UnitName()] = "Running " + got.InvocationID
			}
			later := be.new(t, 5*time.Second)
			all := map[string]string{}
			for _, units := range byInst {
				maps.Copy(all, units)
			}
			sts, err := later.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(all, listed(t, sts)); diff != "" {
				t.Errorf("List (-want,+got):\n%s", diff)
			}
			for _, name := range []string{"list", "list-other", "list-none"} {
				inst, err := be.lay.Instance("ns1", name)
				if err != nil {
					t.Fatal(err)
				}
				sts, err := later.ListInstance(ctx, inst)
				if err != nil {
					t.Fatal(err)
				}
				want := byInst[name]
				if want == nil {
					want = map[string]string{}
				}
				if diff := cmp.Diff(want, listed(t, sts)); diff != "" {
					t.Errorf("ListInstance(%s) (-want,+got):\n%s", name, diff)
				}
			}
		})
	}
}

// listed is each status's start outcome and invocation by unit; each must
// map back to its own slot.
func listed(t *testing.T, sts []Status) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, st := range sts {
		if st.Slot == nil || st.Slot.UnitName() != st.Unit {
			t.Errorf("%s maps back to %v", st.Unit, st.Slot)
		}
		got[st.Unit] = st.StartOutcome().Kind.String() + " " + st.InvocationID
	}
	return got
}
