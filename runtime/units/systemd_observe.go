package units

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// Observe reads the unit's state now. Once the manager has forgotten how
// a gone unit ended (a transient unit that succeeded is unloaded), its
// exit record, written by ExecStopPost, still tells.
func (b *Systemd) Observe(ctx context.Context, p layout.Slot) (Status, error) {
	c, err := b.connection(ctx)
	if err != nil {
		return Status{}, err
	}
	st, err := b.observe(ctx, c, p.UnitName())
	if err != nil {
		return st, err
	}
	st.Slot = &p
	if st.Exit == nil && st.Gone() {
		var e record.Exit
		err := record.Read(p.Instance().ExitDir(), record.Name(p, record.ExitSuffix), &e)
		if err == nil && (st.InvocationID == "" || e.InvocationID == st.InvocationID) {
			st.Exit = &outcome.Exit{Result: e.Result, Code: e.Code, Signal: e.Signal, At: e.At}
		}
	}
	attachExecFailure(p, st.Exit)
	return st, nil
}

// CLD_* codes of ExecMainCode.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

func (b *Systemd) observe(ctx context.Context, c *sddbus.Conn, unit string) (Status, error) {
	v, err := getProps(ctx, c, b.reads, unit)
	if err != nil {
		return Status{}, fmt.Errorf("units: read %s: %w", unit, err)
	}
	st := Status{Unit: unit}
	load, _ := v[propLoadState].(string)
	st.Loaded = load == "loaded"
	st.ActiveState, _ = v[propActiveState].(string)
	st.SubState, _ = v[propSubState].(string)
	if id, ok := v[propInvocationID].([]byte); ok && len(id) > 0 {
		st.InvocationID = hex.EncodeToString(id)
	}
	if !st.Loaded {
		return st, nil
	}
	if err := v.serviceErr(); err != nil {
		return Status{}, fmt.Errorf("units: read %s: %w", unit, err)
	}
	if pid, ok := v[propMainPID].(uint32); ok {
		st.MainPID = int(pid)
	}
	st.Cgroup, _ = v[propControlGroup].(string)
	code, _ := v[propExecMainCode].(int32)
	status, _ := v[propExecMainStatus].(int32)
	result, _ := v[propResult].(string)
	exitAt, _ := v[propExecMainExitTimestamp].(uint64)
	if code != 0 && st.MainPID == 0 {
		e := &outcome.Exit{Result: result}
		switch code {
		case cldExited:
			e.Code = int(status)
		case cldKilled, cldDumped:
			e.Signal = int(status)
		}
		if exitAt != 0 {
			e.At = time.UnixMicro(int64(exitAt))
		}
		st.Exit = e
	}
	return st, nil
}

// List returns every unitlet service the manager has loaded.
func (b *Systemd) List(ctx context.Context) ([]Status, error) {
	return b.list(ctx, func(string, *layout.Slot) bool { return true })
}

// ListInstance is List for inst's services alone: only they are observed.
func (b *Systemd) ListInstance(ctx context.Context, inst layout.Instance) ([]Status, error) {
	return b.list(ctx, func(unit string, p *layout.Slot) bool {
		if p != nil {
			pi := p.Instance()
			return pi.Namespace() == inst.Namespace() && pi.Name() == inst.Name()
		}
		return inst.HasUnit(unit)
	})
}

// list observes each loaded unitlet service keep accepts, by its name and
// the slot that name maps back to (nil when it maps to none).
func (b *Systemd) list(ctx context.Context, keep func(unit string, p *layout.Slot) bool) ([]Status, error) {
	c, err := b.connection(ctx)
	if err != nil {
		return nil, err
	}
	us, err := c.ListUnitsByPatternsContext(ctx, nil, []string{layout.UnitPrefix + "-*.service"})
	if err != nil {
		return nil, fmt.Errorf("units: list: %w", err)
	}
	out := make([]Status, 0, len(us))
	for _, u := range us {
		proc, perr := b.slotOf(u.Name)
		if !keep(u.Name, proc) {
			continue
		}
		if perr != nil {
			b.cfg.Log.Info("listed unit maps to no process slot", "unit", u.Name, "err", perr)
		}
		st, err := b.observe(ctx, c, u.Name)
		if err != nil {
			return nil, err
		}
		st.Slot = proc
		out = append(out, st)
	}
	return out, nil
}

// slotOf maps a unit's name back to its slot; a backend given no state
// root maps none.
func (b *Systemd) slotOf(unit string) (*layout.Slot, error) {
	if b.cfg.Layout.StateRoot == "" {
		return nil, nil
	}
	p, err := ParseUnitName(b.cfg.Layout, unit)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Stop asks the unit to stop (SIGTERM, then SIGKILL after its grace) and
// waits for the stop job. A unit the manager does not know is stopped.
func (b *Systemd) Stop(ctx context.Context, p layout.Slot) error {
	c, err := b.connection(ctx)
	if err != nil {
		return err
	}
	return stopUnit(ctx, c, p.UnitName())
}

func stopUnit(ctx context.Context, c *sddbus.Conn, unit string) error {
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, unit, "replace", done); err != nil {
		if noSuchUnit(err) {
			return nil
		}
		return fmt.Errorf("units: stop %s: %w", unit, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("units: stop %s: job result %q", unit, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("units: stop %s: %w", unit, ctx.Err())
	}
}

// Kill sends SIGKILL to every process of the unit now.
func (b *Systemd) Kill(ctx context.Context, p layout.Slot) error {
	c, err := b.connection(ctx)
	if err != nil {
		return err
	}
	unit := p.UnitName()
	if err := c.KillUnitWithTarget(ctx, unit, sddbus.All, int32(syscall.SIGKILL)); err != nil && !noSuchUnit(err) {
		return fmt.Errorf("units: kill %s: %w", unit, err)
	}
	return nil
}

// unitExists reports the manager's refusal to create a unit under a
// name already loaded: nothing was created.
func unitExists(err error) bool {
	var de godbus.Error
	return errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.UnitExists"
}

func noSuchUnit(err error) bool {
	var de godbus.Error
	return errors.As(err, &de) && (de.Name == "org.freedesktop.systemd1.NoSuchUnit" ||
		de.Name == "org.freedesktop.systemd1.LoadFailed")
}

// proofPoll is how often a proof looks again.
const proofPoll = 5 * time.Millisecond

// Prove stops the unit and proves it gone: the stop answered, the unit
// inactive, its cgroup empty in every hierarchy CgroupDirs names.
func (b *Systemd) Prove(ctx context.Context, p layout.Slot) outcome.Kill {
	return b.proofs.run(ctx, func(ctx context.Context) outcome.Kill {
		c, err := b.connection(ctx)
		if err != nil {
			return outcome.Unproven(outcome.StopUnanswered, err)
		}
		k := b.prove(ctx, c, p)
		if k.Proven {
			// A failed unit stays loaded, and counts among the host's
			// failed units, until it is reset; how it ended is kept in
			// its exit record.
			if err := c.ResetFailedUnitContext(ctx, p.UnitName()); err != nil && !noSuchUnit(err) {
				b.cfg.Log.Info("failed state not reset", "unit", p.UnitName(), "err", err.Error())
			}
		}
		return k
	})
}

func (b *Systemd) prove(ctx context.Context, c *sddbus.Conn, p layout.Slot) outcome.Kill {
	unit := p.UnitName()
	// Where the unit's cgroup is: the slice's, which outlives the unit.
	slice, err := b.observeSlice(ctx, c, p.Instance().SliceName())
	if err != nil {
		return outcome.Unproven(outcome.StopUnanswered, fmt.Errorf("units: read slice of %s: %w", unit, err))
	}
	if err := stopUnit(ctx, c, unit); err != nil {
		return outcome.Unproven(outcome.StopUnanswered, err)
	}
	for {
		st, err := b.observe(ctx, c, unit)
		if err == nil && st.Gone() {
			break
		}
		if ctx.Err() != nil {
			return outcome.Unproven(outcome.UnitActive, fmt.Errorf("units: %s still %s: %w", unit, st.ActiveState, ctx.Err()))
		}
		time.Sleep(proofPoll)
	}
	if !slice.active {
		// The instance's slice was never started (systemd loads a
		// slice by name on demand, inactive) or has stopped, which
		// systemd does only once everything in it is gone: no unit of
		// the instance has a cgroup.
		return outcome.ProvenKill()
	}
	if slice.cgroup == "" {
		return outcome.Unproven(outcome.NoDelegation, fmt.Errorf("units: the slice of %s has no cgroup to read", unit))
	}
	// The slice is active, so its cgroup exists: where none of the dirs
	// it maps to is there, the agent is looking in the wrong place (a
	// hierarchy it cannot see), and "no unit dir" would prove nothing.
	if err := visible(b.cfg.CgroupDirs(slice.cgroup)); err != nil {
		return outcome.Unproven(outcome.NoDelegation, fmt.Errorf("units: cannot see the cgroup of %s: %w", unit, err))
	}
	dirs := b.cfg.CgroupDirs(slice.cgroup + "/" + unit)
	for {
		n, err := populated(dirs)
		if err == nil && n == 0 {
			return outcome.ProvenKill()
		}
		if ctx.Err() != nil || (err != nil && !errors.Is(err, os.ErrNotExist)) {
			reason := outcome.CgroupNotEmpty
			if errors.Is(err, os.ErrPermission) {
				reason = outcome.Permission
			}
			return outcome.Unproven(reason, fmt.Errorf("units: %s: %d process(es) left in its cgroup: %w", unit, n, errors.Join(err, ctx.Err())))
		}
		time.Sleep(proofPoll)
	}
}

type sliceState struct {
	active bool
	cgroup string
}

func (b *Systemd) observeSlice(ctx context.Context, c *sddbus.Conn, slice string) (sliceState, error) {
	up, err := c.GetUnitPropertiesContext(ctx, slice)
	if err != nil {
		return sliceState{}, err
	}
	load, _ := up["LoadState"].(string)
	active, _ := up["ActiveState"].(string)
	if load != "loaded" || active == "inactive" {
		return sliceState{}, nil
	}
	sp, err := c.GetUnitTypePropertiesContext(ctx, slice, "Slice")
	if err != nil {
		return sliceState{}, err
	}
	cg, _ := sp["ControlGroup"].(string)
	return sliceState{active: true, cgroup: cg}, nil
}

// populated counts the processes in each dir's cgroup tree; a dir that
// does not exist holds none.
func populated(dirs []string) (int, error) {
	n := 0
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += len(strings.Fields(string(b)))
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// visible requires at least one of dirs to exist.
func visible(dirs []string) error {
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			return nil
		}
	}
	return fmt.Errorf("none of %v exists", dirs)
}
