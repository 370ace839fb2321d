package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/prepare"
	"github.com/unitlet/unitlet/runtime/terminal"
	"github.com/unitlet/unitlet/runtime/units"
)

// RunRequest is a one-off command in a generation's environment: its
// env, identity, host and working dir come from that generation's launch
// file, its unit and cgroup child are its own (role command, named Name).
type RunRequest struct {
	InstanceRef
	Name       string // the command's name (layout.Instance.Command)
	Generation int64
	Argv       []string
	// Stdout and Stderr receive the command's two streams, apart, as
	// written; each is written from one goroutine at a time.
	Stdout, Stderr io.Writer
	// Stdin is what the command reads (nil: nothing, an immediate EOF).
	Stdin io.Reader
	// TTY runs the command on a terminal of its own, made in its sandbox
	// (runtime/terminal): Stdin is typed on it, its output (stdout and
	// stderr as one) goes to Stdout. Size is its first size, Resize
	// brings later ones until it closes.
	TTY    bool
	Size   terminal.Size
	Resize <-chan terminal.Size
	// Grace is the stop's SIGTERM-to-kill time when ctx ends first.
	Grace time.Duration
	// Grant reads the administrator's word on a named user now: a run is
	// a new start, so a generation whose user is no longer granted runs
	// no command. nil: no named user is granted.
	Grant func(user string) (identity.Grant, error)
}

// granted refuses a run as c, the generation's identity, when c is a
// named user no grant gives now, or uid 0 without a grant of root.
func (req RunRequest) granted(c identity.Credential) error {
	if c.User == "" {
		return nil
	}
	var g identity.Grant
	if req.Grant != nil {
		var err error
		if g, err = req.Grant(c.User); err != nil {
			return fmt.Errorf("node: grant of %s: %w", c.User, err)
		}
	}
	switch {
	case g.User != c.User:
		return fmt.Errorf("node: run as %s: %w", c.User, identity.ErrNotGranted)
	case c.UID == 0 && !g.Root:
		return fmt.Errorf("node: run as %s: %w", c.User, identity.ErrRootRefused)
	}
	return nil
}

// RunResult is how a run ended.
type RunResult struct {
	Start outcome.Start
	// Exit is the command's own end, when it ended by itself and its
	// record was read.
	Exit *outcome.Exit
	// Stopped: ctx ended (the caller went away) before the command did.
	Stopped bool
	// Kill is the proof that nothing of the run is left; unproven, the
	// slot stays held and listed, for the Adopter or a later Retire.
	Kill outcome.Kill
	// Output is the first error handing the output over (the caller gone).
	Output error
}

// proofBudget bounds the stop and proof of a run whose caller went away.
const proofBudget = 30 * time.Second

// Run starts the command and waits until it ends or ctx does; either way
// it returns only once the run's cgroup is proven empty or the proof
// failed (Kill says which). A proven run leaves no file behind.
func (n *Node) Run(ctx context.Context, req RunRequest) RunResult {
	ref := Ref{InstanceRef: req.InstanceRef, Role: layout.RoleCommand, Command: req.Name}
	res, p, closeStreams := n.startRun(ctx, ref, req)
	if res.Start.Kind == outcome.NotStarted {
		return res
	}
	res.Stopped = !n.waitEmpty(ctx, p)
	grace := time.Duration(0) // ended by itself: only the proof is left
	if res.Stopped {
		grace = req.Grace
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+proofBudget)
	defer cancel()
	res.Kill = n.Retire(pctx, ref, grace)
	res.Output = closeStreams()
	if !res.Kill.Proven {
		return res
	}
	switch st, err := n.cfg.Backend.Observe(pctx, p); {
	case err != nil:
		// The run is proven gone; only how it ended is not known.
		n.cfg.Log.Info("run's end not read", "unit", p.UnitName(), "err", err)
	case !res.Stopped:
		res.Exit = st.Exit
	}
	if err := n.Forget(pctx, ref); err != nil {
		n.cfg.Log.Info("forget run", "unit", p.UnitName(), "err", err)
	}
	return res
}

// startRun prepares the run's slot, binds its two stream sockets and
// starts its unit, serialised with the Instance's other starts. A run
// started is held; closeStreams waits for its output and lets go of it.
func (n *Node) startRun(ctx context.Context, ref Ref, req RunRequest) (res RunResult, p layout.Slot, closeStreams func() error) {
	notStarted := func(err error) (RunResult, layout.Slot, func() error) {
		res.Start.Kind, res.Start.Cause = outcome.NotStarted, err
		return res, p, nil
	}
	p, err := n.procOf(ref)
	if err != nil {
		return notStarted(err)
	}
	res.Start.Unit = p.UnitName()
	if len(req.Argv) == 0 {
		return notStarted(fmt.Errorf("node: run %s: no command", req.Name))
	}
	in := n.instanceOf(req.InstanceRef)
	in.starting.Lock()
	defer in.starting.Unlock()
	pr, lf, err := n.prepareRun(ctx, ref, p, req)
	if err != nil {
		return notStarted(&PrepareError{Err: err})
	}
	closeStreams, err = listenStreams(p, req)
	if err != nil {
		pr.Close()
		return notStarted(&PrepareError{Err: err})
	}
	if req.TTY {
		pr.Terminal = &launch.Terminal{Socket: p.TerminalSocket()}
	}
	if err := pr.WriteLaunch(lf.Host, req.Argv, lf.WorkingDir); err != nil {
		closeStreams()
		pr.Close()
		return notStarted(&PrepareError{Err: fmt.Errorf("node: launch file of %s: %w", p.UnitName(), err)})
	}
	res.Start = n.cfg.Backend.Start(ctx, units.Spec{Slot: p, Grace: req.Grace})
	if res.Start.Kind == outcome.NotStarted {
		closeStreams()
		pr.Close()
		_ = n.Forget(context.WithoutCancel(ctx), ref)
		return res, p, nil
	}
	n.mu.Lock()
	in.slots[ref] = slotOf(pr, nil)
	n.mu.Unlock()
	n.cfg.Log.Info("run started", "unit", p.UnitName(), "generation", req.Generation, "pid", res.Start.MainPID)
	return res, p, closeStreams
}

// prepareRun checks that the run's slot is free and prepares it from its
// generation's launch file.
func (n *Node) prepareRun(ctx context.Context, ref Ref, p layout.Slot, req RunRequest) (*prepare.Result, launch.File, error) {
	li := p.Instance()
	g, err := li.Generation(req.Generation)
	if err != nil {
		return nil, launch.File{}, err
	}
	lf, err := launch.Read(li.PrivateDir(), g.LaunchFile())
	if err != nil {
		return nil, launch.File{}, fmt.Errorf("node: run against generation %d: %w", req.Generation, err)
	}
	if err := req.granted(lf.Identity); err != nil {
		return nil, launch.File{}, err
	}
	st, err := n.cfg.Backend.Observe(ctx, p)
	if err != nil {
		return nil, launch.File{}, fmt.Errorf("node: observe %s before run: %w", p.UnitName(), err)
	}
	n.mu.Lock()
	_, held := n.instances[req.InstanceRef].slots[ref]
	n.mu.Unlock()
	if held || !st.Gone() {
		return nil, launch.File{}, fmt.Errorf("node: a run called %s is already there (%s)", req.Name, st.ActiveState)
	}
	// A run is who its generation is, in the same world.
	app, userns := lf.Identity, lf.UserNamespace != nil
	if userns {
		app = launch.Identity{User: lf.Identity.User, UID: lf.UserNamespace.UID, GID: lf.UserNamespace.GID, Groups: []int{lf.UserNamespace.GID}}
	}
	pr, err := prepare.Prepare(prepare.Request{
		Instance: li, Host: lf.Host, Role: layout.RoleCommand, Generation: req.Generation, Name: req.Name,
		SocketGID: n.cfg.SocketGID, App: app, RootInUserNamespace: userns, Logger: n.cfg.Log,
		AllowMetadata: len(lf.NetworkDeny) == 0,
	})
	if err != nil {
		return nil, launch.File{}, fmt.Errorf("node: prepare %s: %w", p.UnitName(), err)
	}
	return pr, lf, nil
}

// listenStreams binds the run's stdin, stdout and stderr sockets afresh,
// and with a TTY its terminal socket; closeAll waits for the output and
// lets go of them. With a TTY the three streams carry only what fails
// before the terminal is made (the trampoline's own word), to the same
// writer as the terminal's output.
func listenStreams(p layout.Slot, req RunRequest) (closeAll func() error, err error) {
	for _, path := range []string{p.InSocket(), p.LogSocket(), p.ErrLogSocket(), p.TerminalSocket()} {
		if err := removeFile(path); err != nil {
			return nil, fmt.Errorf("node: stale run socket: %w", err)
		}
	}
	stdin, stdout, stderr := req.Stdin, req.Stdout, req.Stderr
	if req.TTY {
		stdin, stdout = nil, &lockedWriter{w: req.Stdout}
		stderr = stdout
	}
	var closers []func() error
	closeAll = func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	bind := func(what, path string, listen func(string) (closer, error)) error {
		c, err := listen(path)
		if err != nil {
			_ = closeAll()
			return fmt.Errorf("node: %s socket of %s: %w", what, p.UnitName(), err)
		}
		closers = append(closers, c.Close)
		return nil
	}
	if err := bind("stdin", p.InSocket(), func(s string) (closer, error) { return logs.ListenFeed(s, stdin) }); err != nil {
		return nil, err
	}
	if err := bind("stdout", p.LogSocket(), func(s string) (closer, error) { return logs.ListenStream(s, stdout) }); err != nil {
		return nil, err
	}
	if err := bind("stderr", p.ErrLogSocket(), func(s string) (closer, error) { return logs.ListenStream(s, stderr) }); err != nil {
		return nil, err
	}
	if req.TTY {
		cfg := terminal.Config{Out: stdout, In: req.Stdin, Size: req.Size, Resize: req.Resize}
		if err := bind("terminal", p.TerminalSocket(), func(s string) (closer, error) { return terminal.Listen(s, cfg) }); err != nil {
			return nil, err
		}
	}
	return closeAll, nil
}

type closer interface{ Close() error }

// lockedWriter is one writer shared by a TTY run's streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// waitEmpty reports true once the run's cgroup is empty, false when ctx
// ended first.
func (n *Node) waitEmpty(ctx context.Context, p layout.Slot) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	empty, err := n.cfg.Backend.WatchEmpty(wctx, p)
	if err != nil {
		n.cfg.Log.Info("no watch on run; polling", "unit", p.UnitName(), "err", err)
		return n.pollEmpty(ctx, p)
	}
	select {
	case <-empty:
		return true
	case <-ctx.Done():
		return false
	}
}

// pollEmpty is waitEmpty without a watch.
func (n *Node) pollEmpty(ctx context.Context, p layout.Slot) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if st, err := n.cfg.Backend.Observe(ctx, p); err == nil {
			if pop, err := n.cfg.Backend.Populated(ctx, p, st); err == nil && !pop && st.Gone() {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
