package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// TestForget: a running generation is not forgotten; once proven gone its
// generation dir, launch file, records and log files go, and its sibling
// keeps everything of its own.
func TestForget(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r1, r2 := e.appRequest("forgetful", 1), e.appRequest("forgetful", 2)
	e.retireAtEnd(t, r2.Ref)
	for _, r := range []StartRequest{r1, r2} {
		if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
			t.Fatalf("start %d: %v (%v)", r.Generation, got.Start.Kind, got.Start.Cause)
		}
		waitReady(ctx, t, e.node, r.Ref)
	}
	files := func(r StartRequest) []string {
		p, err := e.node.procOf(r.Ref)
		if err != nil {
			t.Fatal(err)
		}
		li := p.Instance()
		gen, _ := li.GenDir(r.Generation)
		return []string{gen, filepath.Join(li.PrivateDir(), p.LaunchFile()), p.LogSocket(), p.LogFIFO(),
			filepath.Join(li.ExitDir(), record.Name(p, record.StartSuffix))}
	}
	if err := e.node.Forget(ctx, r1.Ref); !errors.Is(err, ErrHeld) {
		t.Fatalf("Forget of a running generation: %v, want ErrHeld", err)
	}
	for _, f := range files(r1) {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("a refused Forget touched %s: %v", f, err)
		}
	}
	if k := e.node.Retire(ctx, r1.Ref, time.Second); !k.Proven {
		t.Fatalf("retire g1: %v", k.Err())
	}
	if err := e.node.Forget(ctx, r1.Ref); err != nil {
		t.Fatalf("Forget g1: %v", err)
	}
	for _, f := range files(r1) {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("after Forget %s is still there (%v)", f, err)
		}
	}
	for _, f := range files(r2) {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("forgetting g1 touched g2's %s: %v", f, err)
		}
	}
	if body, err := get(ctx, mustAppSocket(t, e, r2.Ref)); err != nil || body != "g2" {
		t.Errorf("g2 after g1 was forgotten: %q %v", body, err)
	}
}

func mustAppSocket(t *testing.T, e *env, ref Ref) string {
	t.Helper()
	sock, err := e.node.appSocket(ref)
	if err != nil {
		t.Fatal(err)
	}
	return sock
}
