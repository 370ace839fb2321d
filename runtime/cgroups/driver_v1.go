package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"golang.org/x/sys/unix"
)

// v1Driver drives v1 controller hierarchies and, on a hybrid host, the
// unified one too (key ""), through the library's fs manager with an
// explicit path map. A process is placed in every hierarchy, so a kill
// and a look for emptiness cover every hierarchy too.
type v1Driver struct {
	h hierarchies
}

func newV1Driver(h hierarchies) *v1Driver { return &v1Driver{h: h} }

func (d *v1Driver) paths(rel string) map[string]string {
	p := make(map[string]string, len(d.h))
	for k, mp := range d.h {
		p[k] = filepath.Join(mp, rel)
	}
	return p
}

func (d *v1Driver) path(subsys, rel string) string {
	mp, ok := d.h[subsys]
	if !ok {
		return ""
	}
	return filepath.Join(mp, rel)
}

func (d *v1Driver) manager(rel string, r *cgroups.Resources) (*fs.Manager, error) {
	if r == nil {
		r = &cgroups.Resources{SkipDevices: true}
	}
	return fs.NewManager(&cgroups.Cgroup{Resources: r}, d.paths(rel))
}

func (d *v1Driver) create(rel string) error {
	m, err := d.manager(rel, nil)
	if err != nil {
		return err
	}
	// Apply(-1) creates without placing; it copies cpuset.cpus/mems.
	if err := m.Apply(-1); err != nil {
		return err
	}
	// Hierarchies the library skips (devices with SkipDevices, unified
	// when /sys/fs/cgroup is not the root) are made here.
	for _, p := range d.paths(rel) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (d *v1Driver) enable(string) error { return nil } // v1 needs no enabling

func (d *v1Driver) controllers(rel string) controllerSet {
	has := func(s string) bool {
		p := d.path(s, rel)
		return p != "" && cgroups.PathExists(p)
	}
	return controllerSet{memory: has("memory"), pids: has("pids"), cpu: has("cpu")}
}

func (d *v1Driver) set(rel string, t Tier, reset bool) error {
	r := t.resources(d.controllers(rel), reset)
	m, err := d.manager(rel, r)
	if err != nil {
		return err
	}
	return m.Set(r)
}

func (d *v1Driver) limits(rel string) (Limits, error) {
	l := Limits{MemoryBytes: Absent, Pids: Absent, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	var err error
	if p := d.path("memory", rel); p != "" {
		if l.MemoryBytes, err = readV1Memory(p); err != nil {
			return l, err
		}
	}
	if p := d.path("pids", rel); p != "" {
		if l.Pids, err = readInt(p, "pids.max"); err != nil {
			return l, err
		}
	}
	if p := d.path("cpu", rel); p != "" {
		if l.CPUQuotaMicros, err = readInt(p, "cpu.cfs_quota_us"); err != nil {
			return l, err
		}
		if l.CPUPeriod, err = readInt(p, "cpu.cfs_period_us"); err != nil {
			return l, err
		}
		if l.CPUWeight, err = readInt(p, "cpu.shares"); err != nil {
			return l, err
		}
	}
	return l, nil
}

// v1MemoryUnlimited: v1 reports "no limit" as the page-rounded maximum.
const v1MemoryUnlimited = int64(1) << 62

func readV1Memory(dir string) (int64, error) {
	v, err := readInt(dir, "memory.limit_in_bytes")
	if err == nil && v >= v1MemoryUnlimited {
		v = Unlimited
	}
	return v, err
}

func (d *v1Driver) place(rel string, pid int) error {
	m, err := d.manager(rel, nil)
	if err != nil {
		return err
	}
	return m.AddPid("", pid)
}

// killOnce: cgroup.kill on the unified hierarchy where it exists (the
// kernel kills that subtree, forks in flight included); then, only if a
// process sits in a v1 hierarchy but not in the unified one (or there is
// no unified one), freeze, SIGKILL every pid seen in any hierarchy, thaw.
// Frozen, no process can fork a new one between the read and the kill.
// Freezing while cgroup.kill's victims exit is slow, hence the check.
func (d *v1Driver) killOnce(rel string) error {
	var errs []error
	inUnified := map[int]bool{}
	if u := d.path("", rel); u != "" && cgroups.PathExists(u) {
		if err := cgroups.WriteFile(u, "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		pids, _ := cgroups.GetAllPids(u)
		for _, p := range pids {
			inUnified[p] = true
		}
	}
	all, err := d.pids(rel)
	if err != nil {
		errs = append(errs, err)
	}
	if !slices.ContainsFunc(all, func(p int) bool { return !inUnified[p] }) {
		return errors.Join(errs...)
	}
	var fm *fs.Manager
	if fp := d.path("freezer", rel); fp != "" && cgroups.PathExists(fp) {
		m, err := fs.NewManager(&cgroups.Cgroup{Resources: &cgroups.Resources{}}, map[string]string{"freezer": fp})
		if err == nil {
			fm = m
			if err := fm.Freeze(cgroups.Frozen); err != nil {
				errs = append(errs, fmt.Errorf("freeze: %w", err))
			}
		}
	}
	pids, err := d.pids(rel)
	if err != nil {
		errs = append(errs, err)
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	if fm != nil {
		if err := fm.Freeze(cgroups.Thawed); err != nil {
			errs = append(errs, fmt.Errorf("thaw: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (d *v1Driver) pids(rel string) ([]int, error) {
	var all []int
	for _, p := range d.paths(rel) {
		pids, err := cgroups.GetAllPids(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return all, err
		}
		all = append(all, pids...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// populated answers from the unified cgroup.events first (one read for
// the whole subtree), then from each v1 hierarchy until one holds a
// process: empty means empty everywhere.
func (d *v1Driver) populated(rel string) (bool, error) {
	if u := d.path("", rel); u != "" {
		pop, err := readPopulated(u)
		if err == nil && pop {
			return true, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	for _, s := range d.order() {
		pids, err := cgroups.GetAllPids(d.path(s, rel))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
		if len(pids) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// order lists the v1 hierarchies, those a placement never skips first.
func (d *v1Driver) order() []string {
	out := []string{}
	for _, s := range []string{"freezer", "pids", "memory"} {
		if _, ok := d.h[s]; ok {
			out = append(out, s)
		}
	}
	for s := range d.h {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (d *v1Driver) exists(rel string) bool {
	for _, p := range d.paths(rel) {
		if cgroups.PathExists(p) {
			return true
		}
	}
	return false
}

func (d *v1Driver) children(rel string) ([]string, error) {
	var names []string
	for _, p := range d.paths(rel) {
		n, err := subdirs(p)
		if err != nil {
			return nil, err
		}
		names = append(names, n...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (d *v1Driver) remove(rel string) error {
	return cgroups.RemovePaths(d.paths(rel))
}

func (d *v1Driver) eventsFile(rel string) string {
	if u := d.path("", rel); u != "" {
		return filepath.Join(u, "cgroup.events")
	}
	return ""
}
