package units

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

// DirectConfig configures the direct backend.
type DirectConfig struct {
	// Layout names every directory, record and cgroup; its CgroupRoot
	// is the cgroup root the instance parents live under.
	Layout layout.Layout
	// CgroupMount is the cgroup mount root ("" is the host's default).
	CgroupMount string
	// Exe is the absolute path of the unitlet binary, run as
	// "<Exe> shim ..." and, by the shim, "<Exe> exec ...".
	Exe string
	// ProofBudget bounds one Prove.
	ProofBudget time.Duration
	Log         logr.Logger
}

// DefaultGrace is a stop's grace when the start gave none (systemd's
// default stop timeout).
const DefaultGrace = 90 * time.Second

// escalateBudget bounds the kill a stop sends after its grace when the
// caller has stopped waiting.
const escalateBudget = 30 * time.Second

// Direct runs each unit under a `unitlet shim` of its own in the unit's
// cgroup, for machines without systemd. Everything it knows after a
// restart comes from the cgroups and the records beneath the exit dirs.
type Direct struct {
	cfg    DirectConfig
	proofs *proofs

	mu       sync.Mutex
	managers map[string]cgroups.Manager

	// pool holds idle, already started shims (direct_pool.go).
	pool shimPool

	// afterStart, when set by a test, runs between the shim's report and
	// the first look at the unit.
	afterStart func()
	// beforeShim, when set by a test, runs once the start record is
	// written and before the shim is started.
	beforeShim func()
	// afterShim, when set by a test, runs once the shim was exec'd and
	// before its report is read: a starter killed here leaves a shim
	// whose fate only the records tell.
	afterShim func(pid int)
	// betweenLooks, when set by a test, runs in Observe between its look
	// at the cgroup and its read of the records.
	betweenLooks func()
	// trampoline, when set by a test, replaces Exe as the trampoline the
	// shim starts (a real shim failing a real exec).
	trampoline string
}

var _ Backend = (*Direct)(nil)

// NewDirect returns the direct backend.
func NewDirect(cfg DirectConfig) (*Direct, error) {
	if cfg.Exe == "" || !filepath.IsAbs(cfg.Exe) {
		return nil, errors.New("units: the unitlet binary path must be absolute")
	}
	if cfg.ProofBudget <= 0 {
		return nil, errors.New("units: direct backend needs a positive ProofBudget")
	}
	if cfg.Layout.CgroupRoot == "" {
		return nil, errors.New("units: direct backend needs Layout.CgroupRoot")
	}
	return &Direct{cfg: cfg, proofs: newProofs(cfg.ProofBudget), managers: map[string]cgroups.Manager{}}, nil
}

// Manager is the cgroup manager of inst, shared with the caller so a raise
// or restore of the parent (an overlap) and the backend's own work see the
// same state.
func (b *Direct) Manager(inst layout.Instance) (cgroups.Manager, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := inst.Cgroup()
	if m, ok := b.managers[key]; ok {
		return m, nil
	}
	m, err := cgroups.New(cgroups.Config{MountRoot: b.cfg.CgroupMount, Root: b.cfg.Layout.CgroupRoot, Log: b.cfg.Log}, inst.Namespace(), inst.Name())
	if err != nil {
		return nil, fmt.Errorf("units: cgroups of %s/%s: %w", inst.Namespace(), inst.Name(), err)
	}
	if m.Parent() != key {
		return nil, fmt.Errorf("units: cgroup parent %s, layout says %s", m.Parent(), key)
	}
	b.managers[key] = m
	return m, nil
}

// Shutdown bounds every running and future proof by ctx.
func (b *Direct) Shutdown(ctx context.Context) { b.proofs.shutdownWith(ctx) }

func newInvocationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Start creates the unit's fresh cgroup child, records that a start is in
// flight, and hands the start to a shim (a warm one when idle). Everything
// before the shim holds its whole job is NotStarted; after it, only the
// shim's own refusal proves nothing ran.
func (b *Direct) Start(ctx context.Context, spec Spec) outcome.Start {
	p := spec.Slot
	unit := p.UnitName()
	inst := p.Instance()
	res := outcome.Start{Unit: unit}
	fail := func(k outcome.StartKind, err error) outcome.Start {
		res.Kind, res.Cause = k, err
		b.cfg.Log.Info("start failed", "unit", unit, "outcome", k.String(), "err", err)
		return res
	}
	c, err := b.claim(spec)
	if err != nil {
		return fail(outcome.NotStarted, err)
	}
	res.Cgroup = c.cgroup()
	notStarted := func(err error) outcome.Start {
		c.undo()
		return fail(outcome.NotStarted, err)
	}
	if err := ctx.Err(); err != nil {
		return notStarted(fmt.Errorf("units: start %s not sent: %w", unit, err))
	}
	// From here the start may run: its report is awaited past the caller's
	// cancellation, within the shutdown's budget (as the systemd backend's).
	ctx, release := b.proofs.detach(ctx, 0)
	defer release()
	args := shim.Args{
		CgroupMount: b.cfg.CgroupMount, CgroupRoot: b.cfg.Layout.CgroupRoot,
		Namespace: inst.Namespace(), Name: inst.Name(), Child: c.child,
		ExitDir: c.dir, Prefix: p.ExitPrefix(), Invocation: c.id, Exe: cmp.Or(b.trampoline, b.cfg.Exe),
		Launch: filepath.Join(inst.PrivateDir(), p.LaunchFile()), LogSocket: p.LogSocket(), ErrSocket: p.ErrLogSocket(), InSocket: p.InSocket(),
	}
	if s, err := shim.CurrentSched(); err == nil {
		args.Sched = &s // the agent's: a warm shim waits in IdleSched
	}
	if b.beforeShim != nil {
		b.beforeShim()
	}
	job, err := args.Job()
	if err != nil {
		return notStarted(fmt.Errorf("units: %s: %w", unit, err))
	}
	b.pool.begin()
	defer b.answered()
	sh, err := b.handOff(job, args.Sched)
	if err != nil {
		return notStarted(fmt.Errorf("units: start shim for %s: %w", unit, err))
	}
	defer sh.report.Close()
	if b.afterShim != nil {
		b.afterShim(sh.pid)
	}
	kind, pid, err := awaitReport(ctx, unit, sh)
	switch kind {
	case outcome.NotStarted:
		return notStarted(err)
	case outcome.Running:
	default:
		return fail(kind, err)
	}
	res.InvocationID, res.MainPID = c.id, pid
	if b.afterStart != nil {
		b.afterStart()
	}
	// The first look needs only the exit record: the shim, alive until
	// it has written one, keeps the cgroup populated, so the cgroup says
	// nothing more.
	var e record.Exit
	switch err := record.Read(c.dir, record.Name(p, record.ExitSuffix), &e); {
	case record.Missing(err):
	case err != nil:
		return fail(outcome.MayHaveRun, fmt.Errorf("units: start %s: started, then: %w", unit, err))
	default:
		res.Exit = &outcome.Exit{Result: e.Result, Code: e.Code, Signal: e.Signal, At: e.At}
		attachExecFailure(p, res.Exit)
		return fail(outcome.ExitedBeforeObserved, fmt.Errorf("%s %w", unit, outcome.ErrExitedBeforeObserved))
	}
	res.Kind = outcome.Running
	return res
}

// claimed is a slot made ready for one start: its fresh cgroup child, the
// invocation ID, and the record of a start in flight.
type claimed struct {
	m                   cgroups.Manager
	child, id, dir, rec string
}

// cgroup is the slot's cgroup as Observe names it.
func (c claimed) cgroup() string { return path.Join(c.m.Parent(), c.child) }

// undo is for a start proven not to have run: the record of a start in
// flight and the fresh child go, so a retry and a re-adoption see nothing.
func (c claimed) undo() {
	_ = os.Remove(filepath.Join(c.dir, c.rec))
	_ = c.m.RemoveChild(c.child)
}

// claim makes the instance parent (with spec's floor; a run's only joins
// it) and the slot's fresh child, clears the last run's records, and records the start in flight.
// On error nothing of it is left.
func (b *Direct) claim(spec Spec) (claimed, error) {
	p := spec.Slot
	unit := p.UnitName()
	child, err := p.Cgroup()
	if err != nil {
		return claimed{}, fmt.Errorf("units: %s: %w", unit, err)
	}
	m, err := b.Manager(p.Instance())
	if err != nil {
		return claimed{}, err
	}
	// A run joins the parent as it is (see Spec.Parent): where there is
	// none, its child is refused.
	if p.Role() != layout.RoleCommand {
		if err := m.EnsureParent(spec.Parent); err != nil {
			return claimed{}, fmt.Errorf("units: %s: %w", unit, err)
		}
	}
	create := func() error {
		if p.Generation() != 0 {
			_, err := m.CreateGeneration(p.Generation(), spec.Tier)
			return err
		}
		_, err := m.CreateRole(child)
		return err
	}
	dir, rec := p.Instance().ExitDir(), record.Name(p, record.StartSuffix)
	err = create()
	if errors.Is(err, cgroups.ErrChildExists) && leftBeforeStart(m, child, dir, rec) {
		// An agent died between making the child and recording the
		// start: nothing was handed to a shim, so the empty child is only
		// a leftover, removed and made fresh.
		if err = m.RemoveChild(child); err == nil {
			err = create()
		}
	}
	if err != nil {
		return claimed{}, fmt.Errorf("units: %s: %w", unit, err)
	}
	c := claimed{m: m, child: child, dir: dir, rec: rec}
	if c.id, err = newInvocationID(); err != nil {
		c.undo()
		return claimed{}, err
	}
	// A slot whose name comes back (a sidecar started again, a seed run
	// again) finds its last run's records. Callers start a slot only once
	// that run is seen gone, so they describe nothing alive, and they must
	// not be read as this run's. Only files are records: whatever else
	// sits at the name is left for the shim to fail on.
	for _, suffix := range []string{record.PidSuffix, record.ExitSuffix, record.ExecSuffix} {
		err := unix.Unlink(filepath.Join(c.dir, record.Name(p, suffix)))
		if err != nil && err != unix.ENOENT && err != unix.EISDIR {
			c.undo()
			return claimed{}, fmt.Errorf("units: %s: stale record: %w", unit, err)
		}
	}
	sr := record.Start{Schema: record.Schema, Identity: record.IdentityOf(p), InvocationID: c.id,
		Cgroup: c.cgroup(), GraceMillis: spec.Grace.Milliseconds(), At: time.Now()}
	if err := record.Write(c.dir, c.rec, sr); err != nil {
		c.undo()
		return claimed{}, fmt.Errorf("units: %s: %w", unit, err)
	}
	return c, nil
}

// leftBeforeStart: child exists, but holds no process and no start of it
// was ever recorded (the record is written before a shim gets the job).
func leftBeforeStart(m cgroups.Manager, child, dir, rec string) bool {
	if pop, err := m.Populated(child); err != nil || pop {
		return false
	}
	var sr record.Start
	return record.Missing(record.Read(dir, rec, &sr))
}

// awaitReport reads the shim's report and says what it proves: Running
// with the main pid, NotStarted only on the shim's own refusal, MayHaveRun
// for anything else.
func awaitReport(ctx context.Context, unit string, sh *warmShim) (outcome.StartKind, int, error) {
	verb, msg, err := readReport(ctx, sh.report)
	switch {
	case err != nil && ctx.Err() != nil:
		return outcome.MayHaveRun, 0, fmt.Errorf("units: start %s: no report from shim %d: %w", unit, sh.pid, err)
	case err != nil:
		// The shim ended without a word: only its refusal code proves
		// it exec'd nothing.
		select {
		case <-sh.done:
			ws := sh.state
			if c := ws.ExitStatus(); ws.Exited() && (c == shim.ExitRefused || c == shim.ExitIdle) {
				return outcome.NotStarted, 0, fmt.Errorf("units: shim for %s refused (status %d)", unit, c)
			}
			return outcome.MayHaveRun, 0, fmt.Errorf("units: shim for %s ended (%s) without a report", unit, describeWait(ws))
		case <-ctx.Done():
			return outcome.MayHaveRun, 0, fmt.Errorf("units: start %s: %w", unit, ctx.Err())
		}
	case verb == shim.Refused:
		select {
		case <-sh.done: // out of the child before it goes
		case <-ctx.Done():
		}
		return outcome.NotStarted, 0, fmt.Errorf("units: %s did not exec: %s", unit, msg)
	case verb != shim.Started:
		return outcome.MayHaveRun, 0, fmt.Errorf("units: start %s: %s", unit, msg)
	}
	pid, err := strconv.Atoi(msg)
	if err != nil {
		return outcome.MayHaveRun, 0, fmt.Errorf("units: start %s: bad report %q", unit, msg)
	}
	return outcome.Running, pid, nil
}

// readReport reads the shim's one report line, giving up when ctx ends.
func readReport(ctx context.Context, r *os.File) (verb, msg string, err error) {
	stop := context.AfterFunc(ctx, func() { _ = r.SetReadDeadline(time.Now()) })
	defer stop()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", "", err
	}
	verb, msg, _ = strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	return verb, msg, nil
}
