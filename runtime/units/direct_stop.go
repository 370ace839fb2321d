package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// Stop sends SIGTERM to every process of the unit but its shim (which
// stays to record the exit), waits for the cgroup to empty for the
// start's grace, then kills what is left and waits until it is empty.
// When ctx ends first the kill still follows the grace, as a manager's
// would.
func (b *Direct) Stop(ctx context.Context, p layout.Slot) error {
	m, child, rs, err := b.unit(p)
	if err != nil {
		return err
	}
	pids, err := m.Pids(child)
	if err != nil {
		return fmt.Errorf("units: stop %s: %w", p.UnitName(), err)
	}
	if len(pids) == 0 {
		return nil
	}
	shimPID := 0
	if rs.pid != nil {
		shimPID = rs.pid.ShimPID
	}
	for _, pid := range pids {
		if pid == shimPID {
			continue
		}
		if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("units: stop %s: signal %d: %w", p.UnitName(), pid, err)
		}
	}
	grace := DefaultGrace
	if rs.start != nil && rs.start.GraceMillis > 0 {
		grace = time.Duration(rs.start.GraceMillis) * time.Millisecond
	}
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	empty, err := m.WatchEmpty(graceCtx, child)
	if err != nil {
		return fmt.Errorf("units: stop %s: %w", p.UnitName(), err)
	}
	select {
	case <-empty:
		return nil
	case <-graceCtx.Done():
		if err := b.kill(ctx, p, m, child).AsError(); err != nil {
			return fmt.Errorf("units: stop %s after its grace: %w", p.UnitName(), err)
		}
		return nil
	case <-ctx.Done():
		// No one else will enforce the grace: keep it in the background.
		left := context.WithoutCancel(ctx)
		go func() {
			select {
			case <-empty:
			case <-graceCtx.Done():
				kctx, cancel := context.WithTimeout(left, escalateBudget)
				defer cancel()
				b.kill(kctx, p, m, child)
			}
		}()
		return fmt.Errorf("units: stop %s: %w", p.UnitName(), ctx.Err())
	}
}

// Kill kills every process of the unit, its shim too, and waits until
// its cgroup is seen empty.
func (b *Direct) Kill(ctx context.Context, p layout.Slot) error {
	m, child, _, err := b.unit(p)
	if err != nil {
		return err
	}
	if err := b.kill(ctx, p, m, child).AsError(); err != nil {
		return fmt.Errorf("units: kill %s: %w", p.UnitName(), err)
	}
	return nil
}

// kill empties child; once proven, a unit whose shim died with it gets
// the exit record the shim could not write.
func (b *Direct) kill(ctx context.Context, p layout.Slot, m cgroups.Manager, child string) cgroups.Proof {
	proof := m.KillAndEmpty(ctx, child)
	if !proof.Proven {
		return proof
	}
	rs, err := readRecords(p)
	if err == nil && rs.pid != nil && rs.exit == nil {
		e := record.Exit{Schema: record.Schema, InvocationID: rs.pid.InvocationID, Result: record.ResultSignal,
			Signal: int(unix.SIGKILL), At: time.Now(), By: "agent"}
		if err := record.Write(p.Instance().ExitDir(), record.Name(p, record.ExitSuffix), e); err != nil {
			b.cfg.Log.Info("kill: no exit record written", "unit", p.UnitName(), "err", err)
		}
	}
	return proof
}

// Prove stops the unit and proves it gone: the stop answered, the unit
// no longer active, its cgroup seen empty. The emptied child is removed:
// a generation never reuses a cgroup.
func (b *Direct) Prove(ctx context.Context, p layout.Slot) outcome.Kill {
	return b.proofs.run(ctx, func(ctx context.Context) outcome.Kill {
		unit := p.UnitName()
		m, child, _, err := b.unit(p)
		if err != nil {
			return outcome.Unproven(outcome.NoDelegation, err)
		}
		if err := b.Stop(ctx, p); err != nil {
			if ctx.Err() != nil {
				return outcome.Unproven(outcome.ReasonFor(ctx.Err()), err)
			}
			return outcome.Unproven(outcome.StopUnanswered, err)
		}
		st, err := b.Observe(ctx, p)
		if err != nil {
			return outcome.Unproven(outcome.UnitActive, err)
		}
		if !st.Gone() && !st.Uncertain {
			return outcome.Unproven(outcome.UnitActive, fmt.Errorf("units: %s still %s", unit, st.ActiveState))
		}
		proof := m.KillAndEmpty(ctx, child)
		if !proof.Proven {
			return outcome.Unproven(killReason(proof, ctx), proof.AsError())
		}
		if err := m.RemoveChild(child); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.cfg.Log.Info("proven empty, not removed", "unit", unit, "err", err)
		}
		return outcome.ProvenKill()
	})
}

// killReason maps a cgroups proof's reason to the outcome's.
func killReason(p cgroups.Proof, ctx context.Context) outcome.KillReason {
	switch p.Reason {
	case cgroups.ReasonPermission:
		return outcome.Permission
	case cgroups.ReasonNoDelegation:
		return outcome.NoDelegation
	}
	if err := ctx.Err(); err != nil {
		return outcome.ReasonFor(err)
	}
	return outcome.CgroupNotEmpty
}

func (b *Direct) unit(p layout.Slot) (cgroups.Manager, string, records, error) {
	child, err := p.Cgroup()
	if err != nil {
		return nil, "", records{}, err
	}
	m, err := b.Manager(p.Instance())
	if err != nil {
		return nil, "", records{}, err
	}
	rs, err := readRecords(p)
	if err != nil {
		return nil, "", records{}, fmt.Errorf("units: %s: %w", p.UnitName(), err)
	}
	return m, child, rs, nil
}
