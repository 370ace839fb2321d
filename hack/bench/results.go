package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ocgroups "github.com/opencontainers/cgroups"
)

// phase is one phase's figures, from the client side.
type phase struct {
	// All: seconds from the first request until every Instance met the
	// phase's condition; Reached: how many did.
	All     float64 `json:"allSeconds"`
	Reached int     `json:"reached"`
	// P50..P99: per-Instance request → condition, seconds.
	P50 float64 `json:"p50Seconds"`
	P90 float64 `json:"p90Seconds"`
	P99 float64 `json:"p99Seconds"`
	// The agent over the phase.
	AgentCPU               float64 `json:"agentCPUSeconds"`
	AgentPeakRSS           int64   `json:"agentPeakRSSBytes"`
	APIRequestsPerInstance float64 `json:"apiRequestsPerInstance"`
	// ControlPlaneCPU: kube-apiserver's and etcd's CPU seconds; MachineBusy:
	// the share of all cores busy over the phase (1: none idle).
	ControlPlaneCPU float64 `json:"controlPlaneCPUSeconds"`
	// UnitsCPU: the CPU seconds of everything in the agent's cgroup root
	// (shims, trampolines, apps); BenchCPU: the bench process's own (its
	// clients and watches, the key minter).
	UnitsCPU    float64 `json:"unitsCPUSeconds"`
	BenchCPU    float64 `json:"benchCPUSeconds"`
	MachineBusy float64 `json:"machineBusy"`
	// BusyCPU: every core's busy CPU seconds over the phase, whoever
	// used them (the named ones above, and the rest: what a shim spends
	// before it enters its unit's cgroup, the kernel's threads).
	BusyCPU float64 `json:"busyCPUSeconds"`
	// ServerRequests: the API server's count per Instance by call, from
	// every client (the bench's own: one create, patch or delete each).
	ServerRequests []string `json:"serverRequestsPerInstance,omitempty"`
	// lat is every Instance's request → condition, and began when each
	// request was sent, for pooling rounds.
	lat   []time.Duration
	began map[string]time.Time
}

// raw is a baseline: N starts of the primitive, all ready.
type raw struct {
	All      float64 `json:"allSeconds"`
	PerStart float64 `json:"perStartSeconds"`
}

type results struct {
	Date        string     `json:"date"`
	N           int        `json:"n"`
	Batch       int        `json:"batch"`
	Create      phase      `json:"create"`
	Swap        phase      `json:"swap"`
	Delete      phase      `json:"delete"`
	BatchCreate phase      `json:"batchCreate"`
	BatchRounds int        `json:"batchRounds"`
	BatchStages []stageRow `json:"batchStages,omitempty"`
	BatchWhere  where      `json:"batchWhere"`
	// BatchFloorP50/P99: the batch's API floor (batchFloor), seconds.
	BatchFloorP50 float64 `json:"batchFloorP50Seconds"`
	BatchFloorP99 float64 `json:"batchFloorP99Seconds"`
	// SingleFloorP50/P99: the same for one Instance alone.
	SingleFloorP50 float64 `json:"singleFloorP50Seconds"`
	SingleFloorP99 float64 `json:"singleFloorP99Seconds"`
	// Single: one Instance applied alone on a settled agent, its rounds
	// pooled (the guard beside the batch).
	Single                 phase      `json:"single"`
	SingleStages           []stageRow `json:"singleStages,omitempty"`
	LeftAfterDelete        []string   `json:"leftAfterDelete"`
	SettleSeconds          float64    `json:"settleSeconds"` // all Ready → the agent's queues empty
	IdleServerRequests     []string   `json:"idleServerRequests,omitempty"`
	IdleAPIRequestsPerMin  float64    `json:"idleAPIRequestsPerMinute"`
	IdleCPUPerMin          float64    `json:"idleCPUSecondsPerMinute"`
	PlatformMiBPerInstance float64    `json:"platformMiBPerInstance"`
	AppMiBPerInstance      float64    `json:"appMiBPerInstance"`
	AgentStartMean         float64    `json:"agentStartMeanSeconds"`
	// The agent's Go memory once all were Ready: what its RSS is made of.
	AgentGoroutines float64 `json:"agentGoroutines"`
	AgentHeapMiB    float64 `json:"agentHeapInuseMiB"`
	AgentStackMiB   float64 `json:"agentStackInuseMiB"`
	AgentRSSAnonMiB float64 `json:"agentRSSAnonMiB"` // its RSS then, private memory
	AgentRSSFileMiB float64 `json:"agentRSSFileMiB"` // and its binary's pages
	AgentThreads    int64   `json:"agentThreads"`
	RawForkExec     *raw    `json:"rawForkExec,omitempty"`
	RawSystemd      *raw    `json:"rawSystemd,omitempty"`
	// Floor is the API floor (floor.go); Reads another client's reads
	// at rest and during the create (apf.go).
	Floor *floorFigures `json:"floor,omitempty"`
	// Foreign: the agent's memory around other nodes' claims.
	Foreign *foreignFigures `json:"foreign,omitempty"`
	// Reboot: the node rebooted under N Instances (reboot.go).
	Reboot *rebootFigures `json:"reboot,omitempty"`
	Reads  reads          `json:"reads"`
}

// nodeMemory is the proportional memory (PSS) per Instance of what the
// platform keeps on the node (shims) and of the apps themselves, read
// from every process in the agent's cgroup root.
func (h *harness) nodeMemory(n int) (platform, app float64) {
	pids, _ := ocgroups.GetAllPids(filepath.Join("/sys/fs/cgroup/pids", h.lay.CgroupRoot))
	var p, a int64
	for _, pid := range pids {
		pss := rollupKiB(pid, "Pss")
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "app" {
			a += pss
		} else {
			p += pss
		}
	}
	return float64(p) / 1024 / float64(n), float64(a) / 1024 / float64(n)
}

func rollupKiB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(v), &n)
			return n
		}
	}
	return 0
}

// table renders the results with the targets of issue 15 beside them.
func (r *results) table() string {
	var b strings.Builder
	row := func(what, got, target string) { fmt.Fprintf(&b, "| %-44s | %-26s | %-14s |\n", what, got, target) }
	fmt.Fprintf(&b, "\nunitlet bench, N=%d, %s\n\n", r.N, r.Date)
	row("figure", "measured", "target")
	row(strings.Repeat("-", 44), strings.Repeat("-", 26), strings.Repeat("-", 14))
	ph := func(name string, p phase, target string) {
		row(name+": all done", fmt.Sprintf("%.1f s (%d/%d)", p.All, p.Reached, r.N), target)
		row(name+": per Instance p50/p90/p99", fmt.Sprintf("%.2f/%.2f/%.2f s", p.P50, p.P90, p.P99), "")
		row(name+": agent CPU, API requests per Instance", fmt.Sprintf("%.1f s, %.1f", p.AgentCPU, p.APIRequestsPerInstance), "")
		row(name+": API server+etcd CPU, cores busy", fmt.Sprintf("%.1f s, %.0f%%", p.ControlPlaneCPU, 100*p.MachineBusy), "")
	}
	ph("create", r.Create, "≤ 15 s")
	ph("overlap swap", r.Swap, "")
	r.rebootRows(row)
	ph("delete", r.Delete, "≤ 15 s")
	row("left on the node after delete", fmt.Sprint(len(r.LeftAfterDelete)), "0")
	row(fmt.Sprintf("one alone (%d rounds): apply→Ready p50/max", r.Single.Reached), fmt.Sprintf("%.0f/%.0f ms", 1000*r.Single.P50, 1000*r.Single.P99), "~70 ms")
	row(fmt.Sprintf("batch of %d ×%d: apply→Ready p50/p90/p99", r.Batch, r.BatchRounds), fmt.Sprintf("%.0f/%.0f/%.0f ms", 1000*r.BatchCreate.P50, 1000*r.BatchCreate.P90, 1000*r.BatchCreate.P99), "p99 ≤ 300 ms")
	row("idle agent: API requests/min", fmt.Sprintf("%.1f", r.IdleAPIRequestsPerMin), "0")
	row("idle agent: CPU s/min", fmt.Sprintf("%.2f", r.IdleCPUPerMin), "≤ 0.5")
	row("agent peak RSS", fmt.Sprintf("%.0f MiB", float64(max(r.Create.AgentPeakRSS, r.Swap.AgentPeakRSS, r.Delete.AgentPeakRSS))/(1<<20)), "≤ 64 MiB")
	row("agent after create: heap, stacks, goroutines", fmt.Sprintf("%.0f MiB, %.0f MiB, %.0f", r.AgentHeapMiB, r.AgentStackMiB, r.AgentGoroutines), "")
	if f := r.Foreign; f != nil {
		row(fmt.Sprintf("%d other nodes' claims: agent live heap", f.Claims), fmt.Sprintf("%.1f → %.1f MiB", f.HeapBeforeMiB, f.HeapAfterMiB), "unchanged")
		row(fmt.Sprintf("%d other nodes' claims: agent RSS anon", f.Claims), fmt.Sprintf("%.1f → %.1f MiB", f.RSSAnonBeforeMiB, f.RSSAnonAfterMiB), "unchanged")
	}
	row("agent after create: RSS anon, file; threads", fmt.Sprintf("%.0f MiB, %.0f MiB; %d", r.AgentRSSAnonMiB, r.AgentRSSFileMiB, r.AgentThreads), "")
	row("platform memory per Instance (PSS)", fmt.Sprintf("%.2f MiB (app: %.2f)", r.PlatformMiBPerInstance, r.AppMiBPerInstance), "≤ 1 MiB")
	row("agent's start, mean (its own metric)", fmt.Sprintf("%.1f ms", r.AgentStartMean*1000), "")
	if rf := r.RawForkExec; rf != nil {
		row("raw fork/exec into cgroups: all ready", fmt.Sprintf("%.1f s (%.1f ms each)", rf.All, rf.PerStart*1000), "")
		row("create all / raw fork/exec all", ratio(r.Create.All, rf.All), "")
		row("agent's start / raw fork/exec, per start", ratio(r.AgentStartMean, rf.PerStart), "≤ 1.5×")
	}
	if rs := r.RawSystemd; rs != nil {
		row("raw StartTransientUnit: all ready", fmt.Sprintf("%.1f s (%.1f ms each)", rs.All, rs.PerStart*1000), "")
		row("create all / raw systemd all", ratio(r.Create.All, rs.All), "")
	}
	fmt.Fprintf(&b, "\nAPI server requests per Instance, by call (every client):\n")
	for _, p := range []struct {
		name string
		rows []string
	}{{"create", r.Create.ServerRequests}, {"swap", r.Swap.ServerRequests}, {"reboot", r.rebootCalls()}, {"delete", r.Delete.ServerRequests}, {"idle minute (total, not per Instance)", r.IdleServerRequests}} {
		fmt.Fprintf(&b, "  %s: %s\n", p.name, strings.Join(p.rows, ", "))
	}
	fmt.Fprintf(&b, "settled (queues empty 10 s) %.1f s after all were Ready\n", r.SettleSeconds)
	b.WriteString(r.cpuTable())
	b.WriteString(r.batchTable())
	b.WriteString(r.floorTable())
	return b.String()
}

// cpuTable is where each mass phase's busy cores went: what bounds a
// phase on a machine whose cores are all busy is who used them.
func (r *results) cpuTable() string {
	var b strings.Builder
	b.WriteString("\nwhere the cores went, CPU seconds over each phase (other: shims before they enter their unit's cgroup, the kernel's threads):\n\n")
	b.WriteString("| phase | busy (cores) | API server+etcd | agent | units (shims, trampolines, apps) | bench (clients, watches, key minter) | other |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	type named struct {
		name string
		p    *phase
	}
	rows := []named{{"create", &r.Create}, {"overlap swap", &r.Swap}}
	if r.Reboot != nil {
		rows = append(rows, named{"reboot (to reported)", &r.Reboot.Reported})
	}
	rows = append(rows, named{"delete", &r.Delete})
	for _, row := range rows {
		p := row.p
		if p.BusyCPU == 0 {
			continue // not run
		}
		other := max(0, p.BusyCPU-p.ControlPlaneCPU-p.AgentCPU-p.UnitsCPU-p.BenchCPU)
		fmt.Fprintf(&b, "| %s | %.1f (%.0f%%) | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
			row.name, p.BusyCPU, 100*p.MachineBusy, p.ControlPlaneCPU, p.AgentCPU, p.UnitsCPU, p.BenchCPU, other)
	}
	return b.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f×", a/b)
}

// rebootRows: the reboot's time-to-serving apart from its
// time-to-reported, and serving beside N raw starts in a burst.
func (r *results) rebootRows(row func(what, got, target string)) {
	f := r.Reboot
	if f == nil {
		return
	}
	s, p := f.Serving, f.Reported
	row("reboot: agent start → /readyz", fmt.Sprintf("%.1f s", f.AgentUp), "")
	row("reboot: time-to-serving (all sockets answer)", fmt.Sprintf("%.1f s (%d/%d)", s.All, s.Reached, r.N), "")
	row("reboot: serving per Instance p50/p90/p99", fmt.Sprintf("%.2f/%.2f/%.2f s", s.P50, s.P90, s.P99), "")
	row("reboot: time-to-reported (all Ready, new)", fmt.Sprintf("%.1f s (%d/%d)", p.All, p.Reached, r.N), "")
	row("reboot: reported per Instance p50/p90/p99", fmt.Sprintf("%.2f/%.2f/%.2f s", p.P50, p.P90, p.P99), "")
	row("reboot: the agent's starts, mean (a burst)", fmt.Sprintf("%.0f ms (%.0f starts)", 1000*f.StartMean, f.Starts), "")
	row("reboot: answering once all were reported", fmt.Sprintf("%d/%d", f.StillServing, r.N), fmt.Sprint(r.N))
	row("reboot: agent CPU, API requests per Instance", fmt.Sprintf("%.1f s, %.1f", p.AgentCPU, p.APIRequestsPerInstance), "")
	row("reboot: API server+etcd CPU, cores busy", fmt.Sprintf("%.1f s, %.0f%%", p.ControlPlaneCPU, 100*p.MachineBusy), "")
	if rf := r.RawForkExec; rf != nil {
		row("reboot: serving / raw fork/exec all (burst)", ratio(s.All, rf.All), "≤ 1.5×")
	}
}

func (r *results) rebootCalls() []string {
	if r.Reboot == nil {
		return nil
	}
	return r.Reboot.Reported.ServerRequests
}
