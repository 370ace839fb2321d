package node

import (
	"context"
	"fmt"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/prepare"
	"github.com/unitlet/unitlet/runtime/units"
)

// PrepareError is a start that failed while the slot was prepared (its
// identity, directories, sockets, launch and env files): nothing was
// handed off, so nothing runs, and the same start may be tried again.
type PrepareError struct{ Err error }

func (e *PrepareError) Error() string { return e.Err.Error() }
func (e *PrepareError) Unwrap() error { return e.Err }

// Start prepares the slot, writes its launch file and starts its unit.
// A slot that was already started is not started again: its observed
// state is returned instead, so a repeated reconcile cannot run it twice.
func (n *Node) Start(ctx context.Context, req StartRequest) StartResult {
	res := StartResult{}
	notStarted := func(err error) StartResult {
		res.Start.Kind, res.Start.Cause = outcome.NotStarted, err
		n.cfg.Log.Info("not started", "namespace", req.Namespace, "name", req.Name,
			"role", req.Role, "generation", req.Generation, "err", err)
		return res
	}
	// What fails before anything is handed off is the node's to retry,
	// not the template's fault: a full disk, an unreadable user database.
	notPrepared := func(err error) StartResult { return notStarted(&PrepareError{Err: err}) }
	p, err := n.procOf(req.Ref)
	if err != nil {
		return notStarted(err)
	}
	res.Unit, res.Start.Unit = p.UnitName(), p.UnitName()
	in := n.instanceOf(req.InstanceRef)
	in.starting.Lock()
	defer in.starting.Unlock()

	st, err := n.cfg.Backend.Observe(ctx, p)
	if err != nil {
		// Without a look at the slot, a start could run it twice; but
		// nothing was handed off, so it is the node's to retry (a bus
		// that did not answer, an agent stopping), never the template's
		// refusal: read as one, it aborted swaps in a DaemonSet rollout.
		return notPrepared(fmt.Errorf("node: observe %s before start: %w", res.Unit, err))
	}
	n.mu.Lock()
	_, held := in.slots[req.Ref]
	n.mu.Unlock()
	if held || !st.Gone() || (p.Role() == layout.RoleApp && st.Loaded) {
		// A generation is never started twice; a role is started again
		// only once its last run is gone and the Node let go of it.
		res.Start = st.StartOutcome()
		res.Cgroup = st.Cgroup
		return res
	}

	cred, userns, err := n.appIdentity(req.InstanceRef, req.User, req.Grant)
	if err != nil {
		return notPrepared(fmt.Errorf("node: identity of %s: %w", res.Unit, err))
	}
	if req.AllowMetadata && !req.Grant.CloudMetadata {
		return notPrepared(fmt.Errorf("node: %s: %w", res.Unit, ErrMetadataNotGranted))
	}
	logFile, err := n.logFile(p.Instance(), in)
	if err != nil {
		return notPrepared(err)
	}
	pr, err := prepare.Prepare(prepare.Request{
		Instance: p.Instance(), Host: req.Host, Role: p.Role(), Generation: p.Generation(), Name: p.SidecarName(),
		SocketGID: n.cfg.SocketGID,
		App:       cred, RootInUserNamespace: userns, AllowMetadata: req.AllowMetadata,
		SpecEnv: req.SpecEnv, RefEnv: req.RefEnv, InstanceKey: req.InstanceKey,
		Fence: in.fence.For(p.Generation()), State: n.stateFunc(in, p.Generation()),
		LogFile: logFile, Logger: n.cfg.Log,
	})
	if err != nil {
		return notPrepared(fmt.Errorf("node: prepare %s: %w", res.Unit, err))
	}
	for _, s := range pr.Timings.Steps {
		res.Steps = append(res.Steps, Step{Name: s.Name, Duration: s.Took})
	}
	for _, w := range pr.Warnings {
		res.Warnings = append(res.Warnings, w.Error())
	}
	if req.Activated && p.Role() == layout.RoleApp {
		if pr.Listen, err = n.offerListener(ctx, in, p.Instance(), p, req.Ref); err != nil {
			pr.Close()
			return notPrepared(fmt.Errorf("node: listening socket of %s: %w", res.Unit, err))
		}
	}
	argv := append(append([]string{}, req.Command...), req.Args...)
	if err := pr.WriteLaunch(req.Host, argv, req.WorkingDir); err != nil {
		pr.Close()
		n.withdraw(p)
		return notPrepared(fmt.Errorf("node: launch file of %s: %w", res.Unit, err))
	}
	// The identity is in the launch file: the trampoline drops to it
	// after it has opened the log socket and built the sandbox as root.
	res.Start = n.cfg.Backend.Start(ctx, units.Spec{Slot: p, Tier: req.Tier, Parent: req.Parent, Grace: req.Grace})
	if res.Start.Kind == outcome.NotStarted {
		n.withdraw(p)
		if err := pr.Close(); err != nil {
			n.cfg.Log.Info("close after NotStarted", "unit", res.Unit, "err", err)
		}
		if ctx.Err() != nil {
			// The caller stopped (an agent shutting down for a rollout)
			// before the start was sent: no verdict on the template, and
			// nothing runs, so the next agent starts it. Read as a
			// refusal, it aborted Overlap swaps in a DaemonSet rollout.
			res.Start.Cause = &PrepareError{Err: fmt.Errorf("node: start of %s not sent before the agent stopped: %w", res.Unit, res.Start.Cause)}
		}
		return res
	}
	// The start read its cgroup on its way (on systemd, ten property
	// reads saved per start); look only where it did not.
	res.Cgroup = res.Start.Cgroup
	if res.Cgroup == "" {
		if st, err := n.cfg.Backend.Observe(ctx, p); err == nil {
			res.Cgroup = st.Cgroup
		}
	}
	wctx, cancel := context.WithCancel(n.life)
	n.mu.Lock()
	in.slots[req.Ref] = slotOf(pr, cancel)
	n.mu.Unlock()
	n.watch(wctx, req.Ref, p)
	n.cfg.Log.Info("started", "unit", res.Unit, "outcome", res.Start.Kind.String(), "pid", res.Start.MainPID)
	return res
}

// logFile is the instance's rotating log, opened on first use.
func (n *Node) logFile(li layout.Instance, in *instance) (*logs.RotatingFile, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if in.log != nil {
		return in.log, nil
	}
	f, err := logs.OpenRotating(li.LogFile(), n.cfg.LogMaxBytes, n.cfg.LogKeep)
	if err != nil {
		return nil, fmt.Errorf("node: log file: %w", err)
	}
	if n.cfg.LogDropped != nil {
		ref := InstanceRef{Namespace: li.Namespace(), Name: li.Name()}
		f.OnDrop(func(reason string) { n.cfg.LogDropped(ref, reason) })
	}
	in.log = f
	return f, nil
}

// LogFile is where inst's output is kept: the current file, and how many
// rotated ones (path.1 ... path.keep) beside it.
func (n *Node) LogFile(inst InstanceRef) (path string, keep int, err error) {
	li, err := n.layoutOf(inst)
	if err != nil {
		return "", 0, err
	}
	return li.LogFile(), n.cfg.LogKeep, nil
}

// Generation states the control socket reports.
const (
	StateServing    = "serving"
	StateNotServing = "notServing"
)

func (n *Node) stateFunc(in *instance, gen int64) func() string {
	return func() string {
		if gen != 0 && in.fence.Serving() == gen {
			return StateServing
		}
		return StateNotServing
	}
}

// Observe reads the slot's unit and whether its cgroup holds processes.
func (n *Node) Observe(ctx context.Context, ref Ref) (State, error) {
	p, err := n.procOf(ref)
	if err != nil {
		return State{}, err
	}
	st, err := n.cfg.Backend.Observe(ctx, p)
	if err != nil {
		return State{}, fmt.Errorf("node: observe: %w", err)
	}
	pop, err := n.cfg.Backend.Populated(ctx, p, st)
	if err != nil {
		return State{}, fmt.Errorf("node: %w", err)
	}
	s := State{Status: st, Populated: pop}
	if st.Exit != nil && !pop {
		s.OOM = n.oomOf(ctx, p)
	}
	return s, nil
}

// oomOf reads an ended slot's OOM kills; nil when its cgroup is gone or
// unreadable (a systemd unit's goes with the unit: its exit's Result
// says "oom-kill" instead).
func (n *Node) oomOf(ctx context.Context, p layout.Slot) *OOM {
	st, err := n.cfg.Backend.Stats(ctx, p)
	if err != nil {
		n.cfg.Log.V(1).Info("OOM kills not read", "unit", p.UnitName(), "err", err.Error())
		return nil
	}
	return &OOM{Kills: st.OOMKills, MemoryLimitBytes: st.MemoryLimitBytes}
}
