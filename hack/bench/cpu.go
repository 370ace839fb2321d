package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
)

// userHZ is /proc/stat's tick: 100 a second on every Linux build the
// bench runs on.
const userHZ = 100

// cpuMark is every CPU counter a phase is measured by but the agent's
// (whose process a reboot replaces), read together.
type cpuMark struct {
	controlPlane, units, self time.Duration
	busy, total               float64
}

func markCPU(unitsRoot string) cpuMark {
	m := cpuMark{controlPlane: controlPlaneCPU(), units: unitsCPU(unitsRoot), self: selfCPU()}
	m.busy, m.total = machineCPU()
	return m
}

// since sets p's CPU figures from m to now, all but the agent's.
func (m cpuMark) since(p *phase, unitsRoot string) {
	now := markCPU(unitsRoot)
	p.ControlPlaneCPU = (now.controlPlane - m.controlPlane).Seconds()
	p.UnitsCPU, p.BenchCPU = (now.units - m.units).Seconds(), (now.self - m.self).Seconds()
	if now.total > m.total {
		p.MachineBusy = (now.busy - m.busy) / (now.total - m.total)
	}
	p.BusyCPU = (now.busy - m.busy) / userHZ
}

// machineCPU is the machine's busy and total CPU time so far (/proc/stat),
// in USER_HZ ticks: over a phase, busy/total says whether the cores, not
// the agent's waits, were the bound.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// controlPlaneCPU is the CPU time so far of this process's kube-apiserver
// and etcd (the bench's children, by name).
func controlPlaneCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	var sum time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		comm := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if (comm != "kube-apiserver" && comm != "etcd") || f[1] != self {
			continue
		}
		if cpu, _, err := procUsage(pid); err == nil {
			sum += cpu
		}
	}
	return sum
}

// unitsCPU is the CPU time so far of everything in the agent's cgroup root
// (shims, trampolines, apps), read as the node reads a unit's; 0 where
// the root cannot be read.
func unitsCPU(root string) time.Duration {
	st, err := cgroups.StatsAt("", root)
	if err != nil {
		return 0
	}
	return time.Duration(st.CPUUsageNanos)
}

// selfCPU is this process's CPU time so far: the bench's clients and
// watches, and the key minter it runs.
func selfCPU() time.Duration {
	cpu, _, _ := procUsage(os.Getpid())
	return cpu
}
