// Package machine reads what a node has for Instances: its memory, the
// CPUs the agent may use and its pid limit, each bounded by the limit the
// agent's cgroup root sets, where it sets one. It returns plain numbers;
// the controllers turn them into the Enrollment's capacity.
package machine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/unitlet/unitlet/runtime/cgroups"
)

// Capacity is a node's whole. A zero field was not readable.
type Capacity struct {
	MemoryBytes int64
	CPUMillis   int64
	Pids        int64
}

// Sources are where Read looks; tests point them at their own files.
type Sources struct {
	// Proc is the proc file system's mount ("" is /proc).
	Proc string
	// CPUs is how many CPUs the agent may run on (runtime.NumCPU: its
	// affinity mask).
	CPUs func() int
	// RootLimits reads the limits of the agent's cgroup root; nil bounds
	// nothing (see cgroups.RootLimits).
	RootLimits func() (cgroups.Limits, error)
}

// Read reads the machine's capacity: MemTotal, the CPUs the agent may
// use, and the lower of the kernel's pid_max and threads-max (a task is a
// thread), each lowered to the cgroup root's limit where there is one.
func Read(s Sources) (Capacity, error) {
	proc := s.Proc
	if proc == "" {
		proc = "/proc"
	}
	mem, err := memTotal(filepath.Join(proc, "meminfo"))
	if err != nil {
		return Capacity{}, err
	}
	pids, err := pidLimit(proc)
	if err != nil {
		return Capacity{}, err
	}
	c := Capacity{MemoryBytes: mem, Pids: pids}
	if s.CPUs != nil {
		c.CPUMillis = int64(s.CPUs()) * 1000
	}
	if s.RootLimits == nil {
		return c, nil
	}
	l, err := s.RootLimits()
	if err != nil {
		return Capacity{}, fmt.Errorf("cgroup root limits: %w", err)
	}
	return bound(c, l), nil
}

// bound lowers c to the limits l sets (a value; not Unlimited or Absent).
func bound(c Capacity, l cgroups.Limits) Capacity {
	lower := func(v, limit int64) int64 {
		if limit > 0 && (v == 0 || limit < v) {
			return limit
		}
		return v
	}
	c.MemoryBytes = lower(c.MemoryBytes, l.MemoryBytes)
	c.Pids = lower(c.Pids, l.Pids)
	if l.CPUQuotaMicros > 0 && l.CPUPeriod > 0 {
		c.CPUMillis = lower(c.CPUMillis, l.CPUQuotaMicros*1000/l.CPUPeriod)
	}
	return c
}

// memTotal is meminfo's MemTotal in bytes.
func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("memory: %s: MemTotal %q is not in kB", path, rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("memory: %s: MemTotal %q is not a size", path, rest)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("memory: %s has no MemTotal", path)
}

// pidLimit is the lower of kernel.pid_max and kernel.threads-max.
func pidLimit(proc string) (int64, error) {
	var limit int64
	for _, name := range []string{"pid_max", "threads-max"} {
		path := filepath.Join(proc, "sys", "kernel", name)
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("pids: %w", err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("pids: %s holds %q, not a count", path, strings.TrimSpace(string(b)))
		}
		if limit == 0 || v < limit {
			limit = v
		}
	}
	if limit == 0 {
		return 0, errors.New("pids: no limit read")
	}
	return limit, nil
}
