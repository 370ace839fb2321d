package node

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestSwapGenerations walks one swap: g1 starts, is ready and promoted;
// g2 starts, is promoted while a client keeps asking through the stable
// socket (no request fails); g1 is retired and proven gone.
func TestSwapGenerations(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := e.node

	r1 := e.appRequest("web", 1)
	e.retireAtEnd(t, r1.Ref)
	got := n.Start(ctx, r1)
	if got.Start.Kind != outcome.Running {
		t.Fatalf("start g1: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	if got.Unit == "" || got.Cgroup == "" || len(got.Steps) == 0 {
		t.Errorf("start result lacks unit, cgroup or steps: %+v", got)
	}
	waitReady(ctx, t, n, r1.Ref)
	st, err := n.Observe(ctx, r1.Ref)
	if err != nil || st.ActiveState != "active" || !st.Populated {
		t.Fatalf("observe g1: %+v %v, want active and populated", st, err)
	}

	stable, err := n.Promote(ctx, r1.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := n.StableSocket(r1.InstanceRef); stable != want {
		t.Errorf("Promote returned %q, StableSocket %q", stable, want)
	}
	if target, _ := os.Readlink(stable); filepath.IsAbs(target) {
		t.Errorf("stable link target %q is absolute, want relative", target)
	}
	if body, err := get(ctx, stable); err != nil || body != "g1" {
		t.Fatalf("GET via stable socket: %q %v, want g1", body, err)
	}

	r2 := e.appRequest("web", 2)
	e.retireAtEnd(t, r2.Ref)
	if err := n.RaiseParent(ctx, r2.InstanceRef, cgroups.Tier{MemoryBytes: 512 << 20, Pids: 128}); err != nil {
		t.Fatal(err)
	}
	if got := n.Start(ctx, r2); got.Start.Kind != outcome.Running {
		t.Fatalf("start g2: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, n, r2.Ref)

	// A client asks through the stable socket before, during and after
	// the flip; every request must be answered.
	var fails, total atomic.Int64
	var lastErr atomic.Value
	flipped := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		after := 0
		for i := 0; i < 5000 && after < 200; i++ {
			select {
			case <-flipped:
				after++
			default:
			}
			total.Add(1)
			if _, err := get(ctx, stable); err != nil {
				fails.Add(1)
				lastErr.Store(err)
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := n.Promote(ctx, r2.Ref); err != nil {
		t.Fatal(err)
	}
	close(flipped)
	<-done
	t.Logf("%d requests through the stable socket across the flip", total.Load())
	if fails.Load() != 0 {
		t.Errorf("%d of %d requests failed during the flip; last: %v", fails.Load(), total.Load(), lastErr.Load())
	}
	if body, err := get(ctx, stable); err != nil || body != "g2" {
		t.Fatalf("GET after promoting g2: %q %v, want g2", body, err)
	}

	c1 := e.cgroupDir(t, r1.Ref)
	p1, err := n.procOf(r1.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p1.LogFIFO()); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("g1's log FIFO while it runs: %v %v, want a named pipe", fi, err)
	}
	if k := n.Retire(ctx, r1.Ref, 2*time.Second); !k.Proven {
		t.Fatalf("retire g1: %v", k.Err())
	}
	if _, err := os.Stat(c1); !os.IsNotExist(err) {
		t.Errorf("g1's cgroup %s still there after a proven retire (%v)", c1, err)
	}
	if _, err := os.Lstat(p1.LogFIFO()); !os.IsNotExist(err) {
		t.Errorf("g1's log FIFO still there after a proven retire (%v)", err)
	}
	st, err = n.Observe(ctx, r1.Ref)
	if err != nil || !st.Gone() || st.Populated {
		t.Errorf("observe retired g1: %+v %v, want gone and empty", st, err)
	}
	if err := n.RestoreParent(ctx, r2.InstanceRef, r2.Parent); err != nil {
		t.Errorf("restore parent after g1 is gone: %v", err)
	}
	if body, err := get(ctx, stable); err != nil || body != "g2" {
		t.Errorf("GET after retiring g1: %q %v, want g2", body, err)
	}
}

// cgroupDir is ref's cgroup in the memory hierarchy of the host.
func (e *env) cgroupDir(t testing.TB, ref Ref) string {
	t.Helper()
	p, err := e.node.procOf(ref)
	if err != nil {
		t.Fatal(err)
	}
	child, err := p.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cgroups.DefaultMountRoot, "memory", p.Instance().Cgroup(), child)
}

// TestPromoteSharesSocketWithGroup: with a socket group, the app's own
// socket (bound under the app's umask, no group write) is handed to that
// group, connectable (0660), before clients are sent to it.
func TestPromoteSharesSocketWithGroup(t *testing.T) {
	const gid = 65534
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := New(Config{Layout: e.lay, Backend: e.direct, SocketGID: gid, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	r := e.appRequest("shared", 1)
	e.retireAtEnd(t, r.Ref)
	if got := n.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	waitReady(ctx, t, n, r.Ref)
	sock, err := n.appSocket(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	modeGid := func() (os.FileMode, uint32) {
		fi, err := os.Lstat(sock)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid
	}
	if mode, _ := modeGid(); mode&0o020 != 0 {
		t.Fatalf("the app bound its socket group-writable (%v): nothing to show", mode)
	}
	if _, err := n.Promote(ctx, r.Ref); err != nil {
		t.Fatal(err)
	}
	if mode, g := modeGid(); mode != 0o660 || g != gid {
		t.Errorf("after promote: socket mode %v gid %d, want 0660 gid %d", mode, g, gid)
	}
}
