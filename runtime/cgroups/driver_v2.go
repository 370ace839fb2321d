package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
)

// v2Driver drives a pure cgroup2 (unified) hierarchy. The library's fs2
// manager sets limits and places processes; its Apply enables every
// controller and assumes /sys/fs/cgroup, so creation and enabling are
// done here, and cgroup.kill, which the library lacks, is written here.
type v2Driver struct {
	mount string
}

func (d *v2Driver) dir(rel string) string { return filepath.Join(d.mount, rel) }

func (d *v2Driver) manager(rel string, r *cgroups.Resources) (*fs2.Manager, error) {
	if r == nil {
		r = &cgroups.Resources{SkipDevices: true}
	}
	return fs2.NewManager(&cgroups.Cgroup{Resources: r}, d.dir(rel))
}

func (d *v2Driver) create(rel string) error { return os.MkdirAll(d.dir(rel), 0o755) }

// limiting are the controllers a tier needs, in cgroup v2 names.
var limiting = []string{"memory", "pids", "cpu"}

// enable turns on, in rel and each ancestor below the mount, those
// limiting controllers that are available but not yet enabled, so that
// rel's children can carry limits. Nothing else is enabled.
func (d *v2Driver) enable(rel string) error {
	parts := strings.Split(filepath.Clean(rel), "/")
	cur := ""
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			cur = filepath.Join(cur, parts[i])
		}
		avail, err := fields(d.dir(cur), "cgroup.controllers")
		if err != nil {
			return err
		}
		on, err := fields(d.dir(cur), "cgroup.subtree_control")
		if err != nil {
			return err
		}
		for _, c := range limiting {
			if avail[c] && !on[c] {
				if err := cgroups.WriteFile(d.dir(cur), "cgroup.subtree_control", "+"+c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func fields(dir, file string) (map[string]bool, error) {
	s, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range strings.Fields(s) {
		out[f] = true
	}
	return out, nil
}

func (d *v2Driver) controllers(rel string) controllerSet {
	c, err := fields(d.dir(rel), "cgroup.controllers")
	if err != nil {
		return controllerSet{}
	}
	return controllerSet{memory: c["memory"], pids: c["pids"], cpu: c["cpu"]}
}

func (d *v2Driver) set(rel string, t Tier, reset bool) error {
	r := t.resources(d.controllers(rel), reset)
	m, err := d.manager(rel, r)
	if err != nil {
		return err
	}
	return m.Set(r)
}

func (d *v2Driver) limits(rel string) (Limits, error) {
	l := Limits{MemoryBytes: Absent, Pids: Absent, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	dir := d.dir(rel)
	var err error
	if has(dir, "memory.max") {
		if l.MemoryBytes, err = readInt(dir, "memory.max"); err != nil {
			return l, err
		}
	}
	if has(dir, "pids.max") {
		if l.Pids, err = readInt(dir, "pids.max"); err != nil {
			return l, err
		}
	}
	if has(dir, "cpu.max") {
		s, err := cgroups.ReadFile(dir, "cpu.max")
		if err != nil {
			return l, err
		}
		q, p, _ := strings.Cut(strings.TrimSpace(s), " ")
		if l.CPUQuotaMicros, err = parseLimit(q); err != nil {
			return l, err
		}
		if l.CPUPeriod, err = parseLimit(p); err != nil {
			return l, err
		}
		if l.CPUWeight, err = readInt(dir, "cpu.weight"); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (d *v2Driver) place(rel string, pid int) error {
	m, err := d.manager(rel, nil)
	if err != nil {
		return err
	}
	return m.AddPid("", pid)
}

// killOnce writes cgroup.kill: the kernel kills the whole subtree,
// including processes forked while it does so.
func (d *v2Driver) killOnce(rel string) error {
	return cgroups.WriteFile(d.dir(rel), "cgroup.kill", "1")
}

func (d *v2Driver) pids(rel string) ([]int, error) {
	pids, err := cgroups.GetAllPids(d.dir(rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return pids, err
}

// populated reads cgroup.events, which covers the whole subtree.
func (d *v2Driver) populated(rel string) (bool, error) {
	return readPopulated(d.dir(rel))
}

func readPopulated(dir string) (bool, error) {
	s, err := cgroups.ReadFile(dir, "cgroup.events")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, errors.New("cgroup.events has no populated line")
}

func (d *v2Driver) exists(rel string) bool { return cgroups.PathExists(d.dir(rel)) }

func (d *v2Driver) children(rel string) ([]string, error) { return subdirs(d.dir(rel)) }

func (d *v2Driver) remove(rel string) error { return cgroups.RemovePath(d.dir(rel)) }

func (d *v2Driver) eventsFile(rel string) string { return filepath.Join(d.dir(rel), "cgroup.events") }

// has reports whether a cgroup interface file exists (its controller is
// enabled for that cgroup).
func has(dir, file string) bool { return cgroups.PathExists(filepath.Join(dir, file)) }

func readInt(dir, file string) (int64, error) {
	s, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return 0, err
	}
	return parseLimit(strings.TrimSpace(s))
}

// parseLimit reads a limit file's value; "max" and v1's -1 are Unlimited.
func parseLimit(s string) (int64, error) {
	if s == "max" || s == "-1" {
		return Unlimited, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// subdirs lists the child cgroups of dir; an absent dir has none.
func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
