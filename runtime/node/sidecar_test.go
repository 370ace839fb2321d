package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// sidecarRequest is the sidecar called sidecar of instance default/name.
func (e *env) sidecarRequest(name, sidecar string) StartRequest {
	return StartRequest{
		Ref: SidecarRef("default", name, sidecar), Host: name + ".example",
		Command: []string{"/bin/sleep", "1000"},
		Parent:  e.appRequest(name, 1).Parent,
		Grace:   time.Second,
	}
}

// TestSidecarsAreSeparateSlots: two sidecars of one Instance run side by
// side; retiring one proves it gone and leaves the other running, and a
// restarted agent lists (and adopts) each by its name.
func TestSidecarsAreSeparateSlots(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := e.sidecarRequest("sides", "cache"), e.sidecarRequest("sides", "log-shipper")
	// Another Instance's sidecar of the same name, for the listings.
	other := e.sidecarRequest("sides-other", "cache")
	pids := map[string]int{}
	for _, r := range []StartRequest{a, b, other} {
		e.retireAtEnd(t, r.Ref)
		res := e.node.Start(ctx, r)
		if res.Start.Kind != outcome.Running {
			t.Fatalf("start %s: %v (%v)", r.Sidecar, res.Start.Kind, res.Start.Cause)
		}
		pids[r.Name+"/"+r.Sidecar] = res.Start.MainPID
	}
	if pids["sides/cache"] == pids["sides/log-shipper"] {
		t.Fatalf("both sidecars report pid %d", pids["sides/cache"])
	}

	n2, _ := e.newNode(t)
	t.Cleanup(func() { _ = n2.Close() })
	refs, err := n2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := func(refs []Ref) {
		slices.SortFunc(refs, func(x, y Ref) int {
			if c := strings.Compare(x.Name, y.Name); c != 0 {
				return c
			}
			return strings.Compare(x.Sidecar, y.Sidecar)
		})
	}
	byName(refs)
	if diff := cmp.Diff([]Ref{a.Ref, b.Ref, other.Ref}, refs); diff != "" {
		t.Errorf("List (-want,+got):\n%s", diff)
	}
	// One Instance's listing holds its own slots and no other's.
	for inst, want := range map[InstanceRef][]Ref{a.InstanceRef: {a.Ref, b.Ref}, other.InstanceRef: {other.Ref}, {"default", "sides-none"}: nil} {
		got, err := n2.ListInstance(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		byName(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListInstance(%v) (-want,+got):\n%s", inst, diff)
		}
	}

	if k := e.node.Retire(ctx, a.Ref, time.Second); !k.Proven {
		t.Fatalf("retire cache: %v", k.Err())
	}
	if err := unix.Kill(pids["sides/cache"], 0); err == nil {
		t.Errorf("cache's pid %d still runs after its proof", pids["sides/cache"])
	}
	st, err := e.node.Observe(ctx, b.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Populated || st.ActiveState != "active" || st.MainPID != pids["sides/log-shipper"] {
		t.Errorf("log-shipper after cache's retirement: %s populated %v pid %d, want active, populated, pid %d",
			st.ActiveState, st.Populated, st.MainPID, pids["sides/log-shipper"])
	}
	if err := unix.Kill(pids["sides/log-shipper"], 0); err != nil {
		t.Errorf("log-shipper's pid %d: %v", pids["sides/log-shipper"], err)
	}
}
