package units

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// An app that exits while Observe is between its two looks is never read
// as "ended unrecorded": the exit its shim wrote before leaving the cgroup
// is seen (CI once caught the other order losing it).
func TestDirectObserveExitBetweenLooks(t *testing.T) {
	rootOnly(t)
	e := newDEnv(t)
	b := e.backend(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	trigger := filepath.Join(t.TempDir(), "go")
	p := makeProc(t, e.lay, "between", 1, "/bin/sh", "-c",
		"while [ ! -e "+trigger+" ]; do sleep 0.01; done; exit 3")
	if got := b.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	child, err := p.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Manager(p.Instance())
	if err != nil {
		t.Fatal(err)
	}

	// Between the looks, the app exits and its shim leaves the cgroup.
	b.betweenLooks = func() {
		b.betweenLooks = nil
		if err := os.WriteFile(trigger, nil, 0o600); err != nil {
			t.Error(err)
			return
		}
		for {
			pids, err := m.Pids(child)
			if err != nil {
				t.Error(err)
				return
			}
			if len(pids) == 0 {
				return
			}
			if ctx.Err() != nil {
				t.Errorf("the unit never left its cgroup: %v", pids)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	st, err := b.Observe(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gone() && st.Exit == nil {
		t.Fatalf("gone without an exit: %+v", st)
	}
	want := &outcome.Exit{Result: "exit-code", Code: 3}
	if diff := cmp.Diff(want, st.Exit, cmpopts.IgnoreFields(outcome.Exit{}, "At")); diff != "" {
		t.Errorf("exit seen by the look across the exit (-want,+got):\n%s", diff)
	}
	if st = waitGone(ctx, t, b, p); st.Exit == nil || st.Exit.Code != 3 {
		t.Errorf("after the exit: %+v, want gone with exit code 3", st)
	}
}
