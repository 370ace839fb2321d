package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestRemove refuses while a slot runs, and afterwards leaves no
// directory and no cgroup of the instance.
func TestRemove(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("gone", 1)
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)
	if _, err := e.node.Promote(ctx, r.Ref); err != nil {
		t.Fatal(err)
	}
	err := e.node.Remove(ctx, r.InstanceRef)
	var pe *PopulatedError
	if !errors.Is(err, ErrPopulated) || !errors.As(err, &pe) || len(pe.Units) != 1 {
		t.Fatalf("remove while running: %v, want a PopulatedError naming one unit", err)
	}
	waitReady(ctx, t, e.node, r.Ref) // a refused Remove touched nothing

	if k := e.node.Retire(ctx, r.Ref, time.Second); !k.Proven {
		t.Fatalf("retire: %v", k.Err())
	}
	if err := e.node.Remove(ctx, r.InstanceRef); err != nil {
		t.Fatalf("remove: %v", err)
	}
	li, err := e.lay.Instance(r.Namespace, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	left := []string{li.DataDir(), li.RunDir(), li.LogDir(), filepath.Dir(li.LogFile())}
	for _, h := range []string{"memory", "pids", "unified"} {
		left = append(left, filepath.Join(cgroups.DefaultMountRoot, h, li.Cgroup()))
	}
	for _, p := range left {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after Remove (%v)", p, err)
		}
	}
	if err := e.node.Remove(ctx, r.InstanceRef); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

// TestProbeAndPromoteRefusals: probes answer per generation socket, and
// what cannot be probed or promoted says why.
func TestProbeAndPromoteRefusals(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("probe", 1)
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)
	never := GenerationRef(r.Namespace, r.Name, 9)
	seed := Ref{InstanceRef: r.InstanceRef, Role: layout.RoleSeed}
	tests := map[string]struct {
		ref     Ref
		r       Readiness
		wantErr error // nil: ready; errAny: some error
	}{
		"connect only":               {ref: r.Ref, r: Readiness{}},
		"http GET":                   {ref: r.Ref, r: Readiness{HTTPPath: "/healthz"}},
		"a generation never started": {ref: never, r: Readiness{}, wantErr: errAny},
		"a role is no generation":    {ref: seed, r: Readiness{}, wantErr: ErrNotAGeneration},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := e.node.Probe(ctx, tc.ref, tc.r)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("probe: %v, want ready", err)
			case tc.wantErr == errAny && err == nil:
				t.Error("probe ready, want an error")
			case tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Errorf("probe: %v, want %v", err, tc.wantErr)
			}
		})
	}
	if _, err := e.node.Promote(ctx, never); !errors.Is(err, ErrNoAppSocket) {
		t.Errorf("promote a generation without socket: %v, want ErrNoAppSocket", err)
	}
	stable, _ := e.node.StableSocket(r.InstanceRef)
	if _, err := os.Lstat(stable); !os.IsNotExist(err) {
		t.Errorf("a refused promote left %s (%v)", stable, err)
	}
	refs, err := e.node.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ref{r.Ref}, refs); diff != "" {
		t.Errorf("List (-want,+got):\n%s", diff)
	}
}

var errAny = errors.New("any error")
