package cgroups

import (
	"github.com/opencontainers/cgroups"
)

// Tier is an instance's resource tier. A zero field means "no limit".
type Tier struct {
	MemoryBytes int64 // memory limit in bytes
	CPUMillis   int64 // CPU in millicores: quota and weight
	Pids        int64 // maximum number of tasks
}

// cpuPeriodMicros is the CFS period every quota here is expressed in.
const cpuPeriodMicros = 100000

// cpuShares is the v1 weight of millis, the kubelet's conversion
// (1000m = 1024 shares, never below the kernel's minimum of 2).
func cpuShares(millis int64) uint64 {
	s := millis * 1024 / 1000
	if s < 2 {
		s = 2
	}
	return uint64(s)
}

// resources turns t into the library's resource set, limited to the
// controllers in have. With reset a zero field writes "no limit" instead
// of leaving the file alone, so restoring a parent clears an overlap
// value the tier does not have.
func (t Tier) resources(have controllerSet, reset bool) *cgroups.Resources {
	r := &cgroups.Resources{SkipDevices: true}
	if have.memory {
		switch {
		case t.MemoryBytes > 0:
			r.Memory = t.MemoryBytes
		case reset:
			r.Memory = -1
		}
	}
	if have.pids {
		switch {
		case t.Pids > 0:
			p := t.Pids
			r.PidsLimit = &p
		case reset:
			p := int64(-1)
			r.PidsLimit = &p
		}
	}
	if have.cpu {
		switch {
		case t.CPUMillis > 0:
			r.CpuQuota = t.CPUMillis * cpuPeriodMicros / 1000
			r.CpuPeriod = cpuPeriodMicros
			r.CpuShares = cpuShares(t.CPUMillis)
			r.CpuWeight = cgroups.ConvertCPUSharesToCgroupV2Value(r.CpuShares)
		case reset:
			r.CpuQuota = -1
			r.CpuPeriod = cpuPeriodMicros
			r.CpuShares = 1024
			r.CpuWeight = 100
		}
	}
	return r
}

// missing names the controllers t needs that have lacks.
func (t Tier) missing(have controllerSet) []string {
	var out []string
	if t.MemoryBytes > 0 && !have.memory {
		out = append(out, "memory")
	}
	if t.Pids > 0 && !have.pids {
		out = append(out, "pids")
	}
	if t.CPUMillis > 0 && !have.cpu {
		out = append(out, "cpu")
	}
	return out
}

// controllerSet is which limiting controllers a cgroup can use.
type controllerSet struct{ memory, pids, cpu bool }

// Limit values read back from a cgroup's files.
const (
	// Unlimited: the file says "max" (or v1's page-rounded maximum).
	Unlimited int64 = -1
	// Absent: no such controller for this cgroup here.
	Absent int64 = -2
)

// Limits are the limits a cgroup's own files hold, read back for
// checks and for status. Each field is a value, Unlimited or Absent.
type Limits struct {
	MemoryBytes    int64
	Pids           int64
	CPUQuotaMicros int64 // per CPUPeriodMicros
	CPUPeriod      int64
	CPUWeight      int64 // v2 cpu.weight, or v1 cpu.shares
}

// tierOf is the tier a cgroup's limits hold: "no limit" (or no such
// controller) is a zero field, the CPU quota is read back as millicores.
func tierOf(l Limits) Tier {
	positive := func(v int64) int64 { return max(v, 0) }
	t := Tier{MemoryBytes: positive(l.MemoryBytes), Pids: positive(l.Pids)}
	if l.CPUQuotaMicros > 0 && l.CPUPeriod > 0 {
		t.CPUMillis = l.CPUQuotaMicros * 1000 / l.CPUPeriod
	}
	return t
}

// higher is the looser of a and b, field by field: a zero field ("no
// limit") is looser than any value.
func higher(a, b Tier) Tier {
	pick := func(x, y int64) int64 {
		if x == 0 || y == 0 {
			return 0
		}
		return max(x, y)
	}
	return Tier{MemoryBytes: pick(a.MemoryBytes, b.MemoryBytes), CPUMillis: pick(a.CPUMillis, b.CPUMillis), Pids: pick(a.Pids, b.Pids)}
}
