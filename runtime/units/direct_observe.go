package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// records are what a unit's exit dir holds about it; nil when absent.
type records struct {
	start *record.Start
	pid   *record.Pid
	exit  *record.Exit
}

func readRecords(p layout.Slot) (records, error) {
	dir := p.Instance().ExitDir()
	var rs records
	var s record.Start
	var pr record.Pid
	var e record.Exit
	for suffix, into := range map[string]any{record.StartSuffix: &s, record.PidSuffix: &pr, record.ExitSuffix: &e} {
		err := record.Read(dir, record.Name(p, suffix), into)
		if record.Missing(err) {
			continue
		}
		if err != nil {
			return rs, err
		}
		switch suffix {
		case record.StartSuffix:
			rs.start = &s
		case record.PidSuffix:
			rs.pid = &pr
		case record.ExitSuffix:
			rs.exit = &e
		}
	}
	return rs, nil
}

// Observe reads the unit's state from its records and its cgroup.
func (b *Direct) Observe(ctx context.Context, p layout.Slot) (Status, error) {
	child, err := p.Cgroup()
	if err != nil {
		return Status{}, err
	}
	m, err := b.Manager(p.Instance())
	if err != nil {
		return Status{}, err
	}
	// The cgroup first, the records after: the shim writes its exit
	// record before it leaves the cgroup, so a cgroup seen empty means
	// the records read next hold every word it wrote. The other order
	// can miss an exit written between the two looks and read a clean
	// exit as "ended unrecorded".
	populated, err := m.Populated(child)
	if err != nil {
		return Status{}, fmt.Errorf("units: observe %s: %w", p.UnitName(), err)
	}
	if b.betweenLooks != nil {
		b.betweenLooks()
	}
	rs, err := readRecords(p)
	if err != nil {
		return Status{}, fmt.Errorf("units: observe %s: %w", p.UnitName(), err)
	}
	st := statusOf(p, path.Join(m.Parent(), child), rs, populated)
	attachExecFailure(p, st.Exit)
	return st, nil
}

// attachExecFailure adds to e, an exit of p, the exec failure the
// trampoline recorded, if any: the command, not the app, ended it. A
// record that cannot be read leaves e as it was.
func attachExecFailure(p layout.Slot, e *outcome.Exit) {
	if e == nil {
		return
	}
	if f, err := record.ReadExec(p.Instance().ExitDir(), record.Name(p, record.ExecSuffix)); err == nil && f != nil {
		e.ExecFailed = f.String()
	}
}

// statusOf reads the state in systemd's words, from the strongest
// evidence down: an exit record, a live cgroup, a pid record, a start
// record.
func statusOf(p layout.Slot, cgroup string, rs records, live bool) Status {
	pc := p
	st := Status{Unit: p.UnitName(), Cgroup: cgroup, Slot: &pc}
	if rs.start == nil && rs.pid == nil && rs.exit == nil && !live {
		st.ActiveState, st.SubState = "inactive", "dead"
		return st
	}
	st.Loaded = true
	if rs.start != nil {
		st.InvocationID = rs.start.InvocationID
	}
	if rs.pid != nil {
		st.InvocationID = rs.pid.InvocationID
	}
	switch {
	case rs.exit != nil:
		e := rs.exit
		st.Exit = &outcome.Exit{Result: e.Result, Code: e.Code, Signal: e.Signal, At: e.At}
		st.ActiveState, st.SubState = "failed", "failed"
		if e.Result == record.ResultSuccess {
			st.ActiveState, st.SubState = "inactive", "dead"
		}
		if live {
			// The main process ended; others of the unit still run.
			st.ActiveState, st.SubState = "deactivating", "stop-sigterm"
		}
	case live && rs.pid != nil:
		st.ActiveState, st.SubState, st.MainPID = "active", "running", rs.pid.MainPID
	case live:
		st.ActiveState, st.SubState = "activating", "start"
	case rs.pid != nil:
		// It ran, and ended with no one left to record how.
		st.ActiveState, st.SubState = "failed", "failed"
	default:
		st.ActiveState, st.SubState, st.Uncertain = "inactive", "dead", true
	}
	return st
}

// List returns every unit the records beneath the run root name (each
// start leaves one), and every populated cgroup child no record claims.
func (b *Direct) List(ctx context.Context) ([]Status, error) {
	var out []Status
	runRoot := b.cfg.Layout.RunRoot
	outer, err := os.ReadDir(runRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("units: list %s: %w", runRoot, err)
	}
	for _, o := range outer {
		if !o.IsDir() {
			continue
		}
		inner, err := os.ReadDir(filepath.Join(runRoot, o.Name()))
		if err != nil {
			return nil, fmt.Errorf("units: list: %w", err)
		}
		for _, i := range inner {
			if !i.IsDir() {
				continue
			}
			sts, err := b.listDir(ctx, filepath.Join(runRoot, o.Name(), i.Name()))
			if err != nil {
				return nil, err
			}
			out = append(out, sts...)
		}
	}
	found, err := cgroups.Discover(b.cgroupsConfig())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("units: list cgroups: %w", err)
	}
	return b.withUnclaimed(out, found), nil
}

// ListInstance is List for inst alone: its exit dir and its parent
// cgroup.
func (b *Direct) ListInstance(ctx context.Context, inst layout.Instance) ([]Status, error) {
	out, err := b.listDir(ctx, inst.ExitDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	found, err := cgroups.DiscoverParent(b.cgroupsConfig(), path.Base(inst.Cgroup()))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("units: list cgroups of %s: %w", inst.Cgroup(), err)
	}
	return b.withUnclaimed(out, []cgroups.Discovered{found}), nil
}

func (b *Direct) cgroupsConfig() cgroups.Config {
	return cgroups.Config{MountRoot: b.cfg.CgroupMount, Root: b.cfg.Layout.CgroupRoot}
}

// withUnclaimed adds to sts every populated child of found that no status
// claims: processes with no record, of a start whose records were lost.
func (b *Direct) withUnclaimed(sts []Status, found []cgroups.Discovered) []Status {
	claimed := map[string]bool{}
	for _, st := range sts {
		claimed[st.Cgroup] = true
	}
	for _, d := range found {
		for _, c := range d.Children {
			cg := path.Join(d.Parent, c.Name)
			if claimed[cg] || len(c.Pids) == 0 {
				continue
			}
			b.cfg.Log.Info("populated cgroup without records", "cgroup", cg, "pids", c.Pids)
			sts = append(sts, Status{Unit: cg, Cgroup: cg, Loaded: true, ActiveState: "active", SubState: "unknown", Uncertain: true})
		}
	}
	return sts
}

// listDir reads the start records in one instance's exit dir. A record
// must map back, through the layout, to the very dir and name it was
// found under.
func (b *Direct) listDir(ctx context.Context, dir string) ([]Status, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("units: list: %w", err)
	}
	var out []Status
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "exit.") || !strings.HasSuffix(name, "."+record.StartSuffix) {
			continue
		}
		var s record.Start
		if err := record.Read(dir, name, &s); err != nil {
			b.cfg.Log.Info("unreadable start record", "dir", dir, "name", name, "err", err)
			continue
		}
		p, err := s.Identity.Slot(b.cfg.Layout)
		if err != nil || p.Instance().ExitDir() != dir || record.Name(p, record.StartSuffix) != name {
			b.cfg.Log.Info("start record names another unit", "dir", dir, "name", name, "err", err)
			continue
		}
		st, err := b.Observe(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
