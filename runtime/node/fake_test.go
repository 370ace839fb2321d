package node

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/unitstest"
)

// The tests on the fake backend check the Node's own bookkeeping (which
// slot it holds, what it asks of the parent, what it lists and reports)
// with no process and no cgroup. They still need root: prepare, which
// the Node runs before every start, hands the private dir to root. What
// the real backends make of the same calls is checked on newEnv.

// fakeEnv is one test's node over an in-memory backend, in directories
// of its own.
type fakeEnv struct {
	lay   layout.Layout
	units *unitstest.Backend
	node  *Node
}

func newFakeEnv(t testing.TB) *fakeEnv {
	t.Helper()
	// Not a skip: a skip would hide every table below. The suites run as
	// root (Node.Start's prepare chowns the slot's directories); the fake
	// takes only cgroups and real processes out of these tests.
	if os.Geteuid() != 0 {
		t.Fatal("runtime/node's tests run as root: Node.Start's prepare chowns the slot's directories")
	}
	// The run root is short: unix socket paths live beneath it.
	run, err := os.MkdirTemp("", "ulfake")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	e := &fakeEnv{lay: layout.Layout{StateRoot: t.TempDir(), RunRoot: run, CgroupRoot: "unitlet-fake"}, units: unitstest.New()}
	e.node = e.newNode(t, e.units)
	return e
}

// newNode is a Node over b.
func (e *fakeEnv) newNode(t testing.TB, b *unitstest.Backend) *Node {
	t.Helper()
	n, err := New(Config{Layout: e.lay, Backend: b, SocketGID: -1, Log: testr.NewWithInterface(t, testr.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// restart is an agent restart: the Node goes with its backend, a new one
// over the same units lists (and so adopts) what the node holds.
func (e *fakeEnv) restart(ctx context.Context, t testing.TB) {
	t.Helper()
	b := e.units.Restart()
	if err := e.node.Close(); err != nil {
		t.Fatal(err)
	}
	e.units, e.node = b, e.newNode(t, b)
	if _, err := e.node.List(ctx); err != nil {
		t.Fatal(err)
	}
}

// Tiers of the tests on the fake: the Instance's, and an overlap's.
var (
	fakeFloor   = cgroups.Tier{MemoryBytes: 256 << 20, Pids: 64, CPUMillis: 500}
	fakeOverlap = cgroups.Tier{MemoryBytes: 512 << 20, Pids: 128, CPUMillis: 1000}
)

// request is generation n of Instance default/name at fakeFloor.
func (e *fakeEnv) request(name string, n int64) StartRequest {
	return StartRequest{
		Ref: GenerationRef("default", name, n), Host: name + ".example",
		Command: []string{"/srv/app"}, Args: []string{"--gen=$(UNITLET_GENERATION)"},
		Tier: fakeFloor, Parent: fakeFloor, Grace: time.Second,
	}
}

// start starts generation n of name, which must run.
func (e *fakeEnv) start(ctx context.Context, t testing.TB, name string, n int64) StartResult {
	t.Helper()
	res := e.node.Start(ctx, e.request(name, n))
	if res.Start.Kind != outcome.Running {
		t.Fatalf("start %s g%d: %v (%v)", name, n, res.Start.Kind, res.Start.Cause)
	}
	return res
}

// proc is ref's process slot.
func (e *fakeEnv) proc(t testing.TB, ref Ref) layout.Slot {
	t.Helper()
	p, err := e.node.procOf(ref)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// inst is name's layout.
func (e *fakeEnv) inst(t testing.TB, name string) layout.Instance {
	t.Helper()
	li, err := e.lay.Instance("default", name)
	if err != nil {
		t.Fatal(err)
	}
	return li
}

// limit is the limit name's parent holds now (zero when there is none).
func (e *fakeEnv) limit(t testing.TB, name string) cgroups.Tier {
	t.Helper()
	l, _ := e.units.Parent(e.inst(t, name))
	return l
}

// TestStartNotSentWhenStopping: a start the agent stopped before sending
// (its context ended: a DaemonSet rollout) is the node's to retry, not a
// refusal of the template; the next start with a live context runs it.
// Read as a refusal, it aborted Overlap swaps mid-rollout.
func TestStartNotSentWhenStopping(t *testing.T) {
	e := newFakeEnv(t)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	req := e.request("rolling", 2)
	res := e.node.Start(stopped, req)
	var retry *PrepareError
	if res.Start.Kind != outcome.NotStarted || !errors.As(res.Start.Cause, &retry) {
		t.Fatalf("start on an ended context: %v (%v), want NotStarted as a PrepareError (retried)", res.Start.Kind, res.Start.Cause)
	}
	if got := e.node.Start(context.Background(), req); got.Start.Kind != outcome.Running {
		t.Fatalf("the retry: %v (%v), want Running", got.Start.Kind, got.Start.Cause)
	}
}

// TestObserveBeforeStartFailsRetried: the look at the slot before a start
// failing (here: the agent stopping mid-look) hands nothing off: the
// node's to retry, not a refusal.
func TestObserveBeforeStartFailsRetried(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request("looked", 1)
	p, err := e.node.procOf(req.Ref)
	if err != nil {
		t.Fatal(err)
	}
	e.units.Inject(p, unitstest.Fault{Observe: errors.New("the bus did not answer")})
	res := e.node.Start(context.Background(), req)
	var retry *PrepareError
	if res.Start.Kind != outcome.NotStarted || !errors.As(res.Start.Cause, &retry) {
		t.Fatalf("start after a failed look: %v (%v), want NotStarted as a PrepareError (retried)", res.Start.Kind, res.Start.Cause)
	}
	e.units.Inject(p, unitstest.Fault{})
	if got := e.node.Start(context.Background(), req); got.Start.Kind != outcome.Running {
		t.Fatalf("the retry: %v (%v), want Running", got.Start.Kind, got.Start.Cause)
	}
}
