package node

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

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
}

var errAny = errors.New("any error")
