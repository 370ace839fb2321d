package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// fakeRuntime injects what a real node cannot be made to show on demand:
// a start whose answer was lost, a kill that never empties. Everything
// else behaves like a healthy node. Calls are recorded in order.
type fakeRuntime struct {
	mu       sync.Mutex
	calls    []string
	start    map[node.Ref]outcome.StartKind // default Running
	probe    map[node.Ref]error             // default ready
	unproven map[node.Ref]outcome.KillReason
	running  map[node.Ref]bool
	// ranAnyway: a MayHaveRun start whose call reached the manager, so
	// the unit runs though its answer was lost.
	ranAnyway map[node.Ref]bool
	exits     map[node.Ref]*outcome.Exit
	events    chan node.Ref
	// listGate, when set, holds List (the adoption) until it is closed.
	listGate chan struct{}
	// refEnv is the Secret/ConfigMap env of each slot's last start.
	refEnv map[node.Ref]map[string]string
	// keys is the instance key each slot's last start was given.
	keys map[node.Ref]string
	// drains are the answers Drain gives a slot, one per call, the last
	// one repeated; none: nothing to drain.
	drains map[node.Ref][]node.DrainState
	// execFails: a slot's command cannot be executed (the exec error and
	// its why); its start reads ExitedBeforeObserved with exit code 127.
	execFails map[node.Ref]string
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		start: map[node.Ref]outcome.StartKind{}, probe: map[node.Ref]error{},
		unproven: map[node.Ref]outcome.KillReason{}, running: map[node.Ref]bool{}, ranAnyway: map[node.Ref]bool{}, exits: map[node.Ref]*outcome.Exit{},
		events: make(chan node.Ref, 64), refEnv: map[node.Ref]map[string]string{}, keys: map[node.Ref]string{},
		drains: map[node.Ref][]node.DrainState{}, execFails: map[node.Ref]string{},
	}
}

func (f *fakeRuntime) record(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// Calls returns the recorded calls about one instance in the order they
// were first made. Repeats are left out: every runtime call is idempotent
// and a reconcile reading a cache older than its last write may repeat one
// (a second start is the exception, and TestNoDoubleStart counts those).
func (f *fakeRuntime) Calls(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, c := range f.calls {
		if fields := strings.Fields(c); len(fields) > 1 && strings.HasPrefix(fields[1], name+"/") && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// Count is how often exactly call was made.
func (f *fakeRuntime) Count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (f *fakeRuntime) set(fn func(f *fakeRuntime)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// Identity refuses, as the node's does, a user g does not grant before
// anything else; it knows app, root and toor (uid 0, granted only as
// root), and wheel (primary gid 0, never granted); any other is unknown.
func (f *fakeRuntime) Identity(_ node.InstanceRef, user string, g identity.Grant) (identity.Credential, error) {
	if user != "" && user != g.User {
		return identity.Credential{}, identity.ErrNotGranted
	}
	switch user {
	case "":
		return identity.Credential{UID: 1879048192, GID: 1879048192}, nil
	case "app":
		return identity.Credential{UID: 1000, GID: 1000, User: user}, nil
	case "root", "toor":
		if !g.Root {
			return identity.Credential{}, identity.ErrRootRefused
		}
		return identity.Credential{User: user}, nil
	case "wheel":
		return identity.Credential{}, fmt.Errorf("user wheel: primary group 0 %w: gid 0 reaches what root's group owns", identity.ErrNeverGranted)
	}
	return identity.Credential{}, identity.ErrUnknownUser
}

func (f *fakeRuntime) Start(_ context.Context, req node.StartRequest) node.StartResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("start %s/%s", req.Name, slot(req.Ref))
	f.refEnv[req.Ref] = req.RefEnv
	f.keys[req.Ref] = req.InstanceKey
	delete(f.exits, req.Ref)
	kind, ok := f.start[req.Ref]
	if !ok {
		kind = outcome.Running
	}
	if msg, ok := f.execFails[req.Ref]; ok {
		s := outcome.Start{Kind: outcome.ExitedBeforeObserved, Unit: req.Name, Cause: outcome.ErrExitedBeforeObserved,
			Exit: &outcome.Exit{Result: "exit-code", Code: 127, ExecFailed: msg}}
		return node.StartResult{Start: s, Unit: req.Name}
	}
	s := outcome.Start{Kind: kind, Unit: req.Name, MainPID: 4242}
	switch kind {
	case outcome.Running:
		f.running[req.Ref] = true
	case outcome.NotStarted:
		s.Cause = outcome.Refused(errors.New("injected: gate refused"))
	case outcome.ExitedBeforeObserved:
		s.Cause, s.Exit = outcome.ErrExitedBeforeObserved, &outcome.Exit{Result: "exit-code", Code: 3}
	case outcome.MayHaveRun:
		s.Cause = outcome.Uncertain(errors.New("injected: connection lost after the call was sent"))
		f.running[req.Ref] = f.ranAnyway[req.Ref]
	case outcome.QueuedJobMayRun:
		s.Cause = outcome.Queued(errors.New("injected: job queued, no answer"))
	}
	return node.StartResult{Start: s, Unit: req.Name, Steps: []node.Step{{Name: "dirs", Duration: time.Microsecond}}}
}

func (f *fakeRuntime) Observe(_ context.Context, ref node.Ref) (node.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := node.State{Populated: f.running[ref]}
	st.Exit = f.exits[ref]
	st.Loaded = f.running[ref] || st.Exit != nil
	if f.running[ref] {
		st.ActiveState = "active"
		st.MainPID = 4242
	} else {
		st.ActiveState = "inactive"
	}
	return st, nil
}

func (f *fakeRuntime) Probe(_ context.Context, ref node.Ref, _ node.Readiness) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probe[ref]
}

func (f *fakeRuntime) Promote(_ context.Context, ref node.Ref) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("promote %s/%s", ref.Name, slot(ref))
	return "/run/unitlet/" + ref.Namespace + "/" + ref.Name + "/app.sock", nil
}

// Activity and Listen: no activated Instance runs on the fake.
func (f *fakeRuntime) Activity(node.InstanceRef) node.Activity { return node.Activity{} }

func (f *fakeRuntime) Listen(context.Context, node.InstanceRef) error { return nil }

// Drain is not recorded among the calls: it only looks.
func (f *fakeRuntime) Drain(_ context.Context, ref node.Ref) (node.DrainState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.drains[ref]
	if len(q) == 0 {
		return node.DrainState{}, nil
	}
	d := q[0]
	if len(q) > 1 {
		f.drains[ref] = q[1:]
	}
	return d, nil
}

func (f *fakeRuntime) Retire(_ context.Context, ref node.Ref, _ time.Duration) outcome.Kill {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("retire %s/%s", ref.Name, slot(ref))
	if reason, ok := f.unproven[ref]; ok {
		return outcome.Unproven(reason, errors.New("injected: cgroup still populated"))
	}
	f.running[ref] = false
	delete(f.exits, ref)
	return outcome.ProvenKill()
}

func (f *fakeRuntime) RaiseParent(_ context.Context, inst node.InstanceRef, t cgroups.Tier) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("raise %s/parent memory=%d", inst.Name, t.MemoryBytes)
	return nil
}

func (f *fakeRuntime) RestoreParent(_ context.Context, inst node.InstanceRef, floor cgroups.Tier) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("restore %s/parent memory=%d", inst.Name, floor.MemoryBytes)
	return nil
}

func (f *fakeRuntime) Remove(_ context.Context, inst node.InstanceRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("remove %s/all", inst.Name)
	return nil
}

// List returns every slot the fake holds: running, or exited and not yet
// retired.
func (f *fakeRuntime) List(ctx context.Context) ([]node.Ref, error) {
	if f.listGate != nil {
		select {
		case <-f.listGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []node.Ref
	for ref, running := range f.running {
		if running || f.exits[ref] != nil {
			out = append(out, ref)
		}
	}
	return out, nil
}

// Forget forgets nothing: the fake keeps no files.
func (f *fakeRuntime) Forget(context.Context, node.Ref) error { return nil }

// ListInstance is List for one Instance.
func (f *fakeRuntime) ListInstance(ctx context.Context, inst node.InstanceRef) ([]node.Ref, error) {
	all, err := f.List(ctx)
	var out []node.Ref
	for _, ref := range all {
		if ref.InstanceRef == inst {
			out = append(out, ref)
		}
	}
	return out, err
}

func (f *fakeRuntime) Events() <-chan node.Ref { return f.events }

func (f *fakeRuntime) StableSocket(inst node.InstanceRef) (string, error) {
	return "/run/unitlet/" + inst.Namespace + "/" + inst.Name + "/app.sock", nil
}

// Run is not a reconciler's call: the agent's server makes it.
func (f *fakeRuntime) Run(context.Context, node.RunRequest) node.RunResult {
	return node.RunResult{Start: outcome.Start{Kind: outcome.NotStarted, Cause: errors.New("fake runtime runs nothing")}}
}

var _ node.Runtime = &fakeRuntime{}

// slot names a Ref in recorded calls: g<n> for a generation,
// sidecar.<name> for a sidecar, else the role.
func slot(r node.Ref) string {
	switch {
	case r.Generation > 0:
		return fmt.Sprintf("g%d", r.Generation)
	case r.Sidecar != "":
		return string(r.Role) + "." + r.Sidecar
	}
	return string(r.Role)
}

// exit makes a running slot exit with code and tells the reconcilers.
func (f *fakeRuntime) exit(ref node.Ref, code int) {
	f.exitQuietly(ref, code)
	f.events <- ref
}

// exitQuietly ends ref with no event: as when the runtime's event buffer
// was full.
func (f *fakeRuntime) exitQuietly(ref node.Ref, code int) {
	f.mu.Lock()
	f.running[ref] = false
	f.exits[ref] = &outcome.Exit{Result: "exit-code", Code: code}
	f.mu.Unlock()
}

// RefEnv is the Secret/ConfigMap env ref's last start was given.
func (f *fakeRuntime) RefEnv(ref node.Ref) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refEnv[ref]
}

// Key is the instance key the last start of ref was given.
func (f *fakeRuntime) Key(ref node.Ref) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[ref]
}
