package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/hostgate"
	"github.com/unitlet/unitlet/internal/metrics"
	"github.com/unitlet/unitlet/runtime/join"
)

// Joining's schedule (seed 002): the mode is checked every joinEvery;
// while approved but not armed, the guard preparation runs at most once
// per prepareEvery.
const (
	joinEvery    = 15 * time.Second
	prepareEvery = time.Minute
)

// joining is how Run gates hosting; tests shorten the schedule and count
// the calls to setupHosting.
type joining struct {
	every, prepareEvery time.Duration
	clock               clock.Clock
	setupHosting        func(ctrl.Manager, Options) error
}

func defaultJoining() joining {
	return joining{every: joinEvery, prepareEvery: prepareEvery, clock: clock.RealClock{}, setupHosting: setupHosting}
}

// guard is the part of join.Guard the loop uses.
type guard interface {
	Check(ctx context.Context) []join.Check
	Prepare() error
}

// guardFor is the guard the agent's flags describe.
func guardFor(opts Options) join.Guard {
	return join.Guard{
		CgroupRoot:  opts.CgroupRoot,
		StateRoot:   opts.StateRoot,
		RunRoot:     opts.RunRoot,
		SocketGroup: opts.SocketGroup,
		Groups:      join.GroupDB{Dir: opts.HostEtc},
		// auto means systemd when its bus answers; only an explicit choice
		// makes the bus a precondition.
		Systemd: opts.UnitBackend == BackendSystemd,
		UID:     os.Geteuid(),
	}
}

// setupEnrollment gates hosting. Without --require-enrollment the node
// hosts at once. Otherwise the joining loop runs in the manager, the
// readiness endpoint fails with the stage until the node may host, and
// setupHosting runs once, when the node first reaches the hosting mode.
func setupEnrollment(mgr ctrl.Manager, opts Options, log logr.Logger, j joining) error {
	if !opts.RequireEnrollment {
		log.Info("enrollment not required: hosting at once, without an approved Enrollment (single dev machine only)")
		opts.Gate = hostgate.Always{}
		metrics.SetMode(metrics.ModeHosting)
		if err := mgr.Add(&probeServer{addr: opts.ProbeAddr, ready: func() error { return nil }, hosting: func() error { return nil }}); err != nil {
			return err
		}
		return j.setupHosting(mgr, opts)
	}
	gate := &hostgate.Switch{}
	opts.Gate = gate
	// A direct client: the loop must work before, and apart from, the
	// hosting reconcilers' cache, and reads only its own Enrollment.
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("enrollment client: %w", err)
	}
	g := guardFor(opts)
	id, err := join.ReadIdentity(opts.HostEtc)
	if err != nil {
		log.Error(err, "node identity incomplete; the Enrollment reports what could be read")
	}
	l := &enrollmentLoop{
		reporter: &controllers.EnrollmentReporter{Client: c, NodeName: opts.NodeName},
		guard:    g,
		facts: controllers.NodeFacts{Identity: id, AgentVersion: Version,
			CgroupMode: g.CgroupMode(), UnitBackend: opts.UnitBackend},
		clock:        j.clock,
		every:        j.every,
		prepareEvery: j.prepareEvery,
		gate:         gate,
		startHosting: func() error { return j.setupHosting(mgr, opts) },
		log:          log.WithName("joining").WithValues("node", opts.NodeName),
	}
	l.approvals = newApprovalWatch(c, opts.NodeName, j.clock, l.log)
	if err := mgr.Add(&probeServer{addr: opts.ProbeAddr, ready: l.ready, hosting: l.hosting}); err != nil {
		return err
	}
	return mgr.Add(l)
}

// enrollmentLoop is the joining mode and the watch over it while hosting.
type enrollmentLoop struct {
	reporter            *controllers.EnrollmentReporter
	guard               guard
	facts               controllers.NodeFacts
	clock               clock.Clock
	every, prepareEvery time.Duration
	gate                *hostgate.Switch
	startHosting        func() error
	log                 logr.Logger
	// approvals, when set, ends a wait between rounds early.
	approvals *approvalWatch

	mu      sync.Mutex
	current join.Decision
	known   bool

	// Owned by Start's goroutine.
	hosted   bool
	prepared time.Time
	logged   map[string]bool // error texts already logged
}

// errFatal marks an error the loop cannot retry: the reconcilers could
// not be registered.
var errFatal = errors.New("hosting could not start")

// NeedLeaderElection is false: every node's agent runs its own loop.
func (l *enrollmentLoop) NeedLeaderElection() bool { return false }

// Start runs the loop until ctx ends (nil) or hosting cannot start. A
// failed API read or write leaves the mode as it was (unknown is not
// joining) and retries with backoff, 1 s doubling to 30 s.
func (l *enrollmentLoop) Start(ctx context.Context) error {
	l.logged = map[string]bool{}
	var wake <-chan struct{} // nil: only the schedule ends a wait
	if l.approvals != nil {
		go l.approvals.run(ctx)
		wake = l.approvals.wake
	}
	bo := apiBackoff()
	for {
		wait := l.every
		if err := l.round(ctx); err != nil {
			if errors.Is(err, errFatal) {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			wait = bo.Step()
			l.logOnce(err, "the API could not be read or written; the mode stays as it was", "retryIn", wait)
		} else {
			bo = apiBackoff()
		}
		select {
		case <-ctx.Done():
			l.log.Info("stopping", "stage", l.decision().Stage)
			return nil
		case <-l.clock.After(wait):
		case <-wake:
		}
	}
}

// round checks the guard, reads the approval, prepares the guard when it
// is due, decides, acts on the decision and reports it.
func (l *enrollmentLoop) round(ctx context.Context) error {
	checks := l.guard.Check(ctx)
	enr, approved, err := l.reporter.Approved(ctx)
	if err != nil {
		return err
	}
	if l.gate.SetRoot(enr.Spec.AllowRoot) {
		l.log.Info("root for Instances", "allowed", enr.Spec.AllowRoot)
	}
	if armed, _ := join.Armed(checks); approved && !armed {
		if now := l.clock.Now(); l.prepared.IsZero() || now.Sub(l.prepared) >= l.prepareEvery {
			l.prepared = now
			if err := l.guard.Prepare(); err != nil {
				l.logOnce(err, "guard preparation incomplete")
			}
			checks = l.guard.Check(ctx)
		}
	}
	d := join.Decide(join.Facts{Approved: approved, Checks: checks, Hosted: l.hosted})
	if err := l.apply(d); err != nil {
		return err
	}
	return l.reporter.Report(ctx, enr, l.facts, checks, d)
}

// apply starts the reconcilers the first time the node may host, sets
// the gate, and logs a line when the stage or its reason changes.
func (l *enrollmentLoop) apply(d join.Decision) error {
	if d.Accepting && !l.hosted {
		l.log.Info("approved and armed: starting the hosting reconcilers")
		if err := l.startHosting(); err != nil {
			return fmt.Errorf("%w: %w", errFatal, err)
		}
		l.hosted = true
	}
	l.gate.Set(d.Accepting)
	if d.Accepting {
		metrics.SetMode(metrics.ModeHosting)
	} else {
		metrics.SetMode(metrics.ModeJoining)
	}
	l.mu.Lock()
	prev, known := l.current, l.known
	l.current, l.known = d, true
	l.mu.Unlock()
	if known && prev.Stage == d.Stage && prev.Reason == d.Reason {
		return nil
	}
	if prev.Stage != d.Stage {
		l.prepared = time.Time{} // a new stage may prepare at once
	}
	l.log.Info("mode", "mode", d.Mode, "stage", d.Stage, "accepting", d.Accepting, "reason", d.Reason)
	return nil
}

func (l *enrollmentLoop) logOnce(err error, msg string, kv ...any) {
	if l.logged[err.Error()] {
		return
	}
	l.logged[err.Error()] = true
	l.log.Error(err, msg, kv...)
}

func (l *enrollmentLoop) decision() join.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// ready is the readiness check: the agent works once it has read its
// Enrollment; a later loss of the API server does not undo it. Whether the node may host is the
// Enrollment's and the mode metric's to say, not readiness': a node
// awaiting approval must not hold up a DaemonSet's rollout.
func (l *enrollmentLoop) ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known {
		return errors.New("joining: the Enrollment has not been read yet")
	}
	return nil
}

// hosting fails, naming the stage, while the node accepts no new work
// (/hostingz). Liveness and readiness are not affected.
func (l *enrollmentLoop) hosting() error {
	l.mu.Lock()
	d, known := l.current, l.known
	l.mu.Unlock()
	switch {
	case !known:
		return errors.New("joining: the Enrollment has not been read yet")
	case !d.Accepting:
		return fmt.Errorf("%s: %s: %s", d.Mode, d.Stage, d.Reason)
	}
	return nil
}
