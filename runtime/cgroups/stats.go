package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
)

// Stats is what a cgroup used, as cAdvisor reports a container's usage.
// A controller the cgroup does not have leaves its fields zero (the
// limit Absent).
type Stats struct {
	// MemoryWorkingSetBytes is usage minus inactive file pages: what the
	// kernel cannot reclaim easily, the figure an OOM kill follows.
	MemoryWorkingSetBytes uint64
	// CPUUsageNanos is the CPU time used by every task the cgroup held.
	CPUUsageNanos uint64
	// OOMKills counts the processes the kernel OOM-killed in the cgroup.
	OOMKills uint64
	// MemoryLimitBytes is the cgroup's memory limit; Unlimited or Absent.
	MemoryLimitBytes int64
}

// Stats reads child's usage ("" is the parent, which covers every child).
// An absent child is ErrNoChild.
func (m *instance) Stats(child string) (Stats, error) {
	if child != "" {
		if err := checkChild(child); err != nil {
			return Stats{}, err
		}
	}
	rel := m.rel(child)
	if !m.d.exists(rel) {
		return Stats{}, fmt.Errorf("%s: %w", rel, ErrNoChild)
	}
	st, err := m.d.stats(rel)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", rel, err)
	}
	return st, nil
}

// StatsAt reads the usage of the cgroup rel (relative to each hierarchy
// below mountRoot, "" is DefaultMountRoot) that no Manager of this
// package drives: a systemd unit's. An absent cgroup is ErrNoChild.
func StatsAt(mountRoot, rel string) (Stats, error) {
	mode, h, err := detectOnce(mountRoot)
	if err != nil {
		return Stats{}, err
	}
	d := newDriver(mode, h)
	rel = path.Clean("/" + rel)[1:]
	if !d.exists(rel) {
		return Stats{}, fmt.Errorf("%s: %w", rel, ErrNoChild)
	}
	st, err := d.stats(rel)
	if err != nil {
		return st, fmt.Errorf("stats of %s: %w", rel, err)
	}
	return st, nil
}

// fileReader returns a cgroup file's content; an absent file's error
// wraps os.ErrNotExist.
type fileReader func(file string) (string, error)

func dirReader(dir string) fileReader {
	return func(file string) (string, error) { return cgroups.ReadFile(dir, file) }
}

// valueOf parses a one-value file ("max" is math.MaxUint64).
func valueOf(read fileReader, file string) (uint64, error) {
	s, err := read(file)
	if err != nil {
		return 0, err
	}
	v, err := fscommon.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}

// keyOf parses key's value from a "key value" file; an absent key is 0,
// as the kernel leaves out a counter it never kept.
func keyOf(read fileReader, file, key string) (uint64, error) {
	s, err := read(file)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		k, v, err := fscommon.ParseKeyValue(line)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", file, err)
		}
		if k == key {
			return v, nil
		}
	}
	return 0, nil
}

// limitOf parses a memory limit file: "max" (v2) or v1's page-rounded
// maximum is Unlimited.
func limitOf(read fileReader, file string) (int64, error) {
	s, err := read(file)
	if err != nil {
		return 0, err
	}
	v, err := parseLimit(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if v >= v1MemoryUnlimited {
		v = Unlimited
	}
	return v, nil
}

// readV2Stats reads a cgroup2 directory: cpu.stat's usage_usec,
// memory.current, memory.stat's inactive_file, memory.events' oom_kill
// and memory.max. Without the memory controller only the CPU is read.
func readV2Stats(read fileReader) (Stats, error) {
	st := Stats{MemoryLimitBytes: Absent}
	usec, err := keyOf(read, "cpu.stat", "usage_usec")
	if err != nil {
		return st, err
	}
	st.CPUUsageNanos = usec * 1000
	usage, err := valueOf(read, "memory.current")
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	inactive, err := keyOf(read, "memory.stat", "inactive_file")
	if err != nil {
		return st, err
	}
	st.MemoryWorkingSetBytes = workingSet(usage, inactive)
	if st.OOMKills, err = keyOf(read, "memory.events", "oom_kill"); err != nil {
		return st, err
	}
	st.MemoryLimitBytes, err = limitOf(read, "memory.max")
	return st, err
}

// readV1Stats reads v1's memory hierarchy (mem; nil if not mounted):
// memory.usage_in_bytes, memory.stat's total_inactive_file (the
// subtree's, as usage covers the subtree), memory.oom_control's oom_kill
// and memory.limit_in_bytes; and cpuacct.usage (cpu; nil if not mounted).
func readV1Stats(mem, cpu fileReader) (Stats, error) {
	st := Stats{MemoryLimitBytes: Absent}
	var err error
	if cpu != nil {
		if st.CPUUsageNanos, err = valueOf(cpu, "cpuacct.usage"); err != nil {
			return st, err
		}
	}
	if mem == nil {
		return st, nil
	}
	usage, err := valueOf(mem, "memory.usage_in_bytes")
	if err != nil {
		return st, err
	}
	inactive, err := keyOf(mem, "memory.stat", "total_inactive_file")
	if err != nil {
		return st, err
	}
	st.MemoryWorkingSetBytes = workingSet(usage, inactive)
	if st.OOMKills, err = keyOf(mem, "memory.oom_control", "oom_kill"); err != nil {
		return st, err
	}
	st.MemoryLimitBytes, err = limitOf(mem, "memory.limit_in_bytes")
	return st, err
}

// workingSet is cAdvisor's: usage less inactive file pages, never below 0
// (the two files are not read at one instant).
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

func (d *v2Driver) stats(rel string) (Stats, error) { return readV2Stats(dirReader(d.dir(rel))) }

// stats reads v1's memory and cpuacct hierarchies; the unified one of a
// hybrid host carries no controller a tier sets.
func (d *v1Driver) stats(rel string) (Stats, error) {
	dir := func(s string) fileReader {
		p := d.path(s, rel)
		if p == "" || !cgroups.PathExists(p) {
			return nil
		}
		return dirReader(p)
	}
	st, err := readV1Stats(dir("memory"), dir("cpuacct"))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%w: %w", ErrNoChild, err)
	}
	return st, err
}
