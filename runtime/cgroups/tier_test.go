package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups"
)

func TestTierResources(t *testing.T) {
	all := controllerSet{memory: true, pids: true, cpu: true}
	p := func(v int64) *int64 { return &v }
	tests := map[string]struct {
		tier  Tier
		have  controllerSet
		reset bool
		want  *cgroups.Resources
	}{
		"full tier": {
			tier: Tier{MemoryBytes: 256 << 20, CPUMillis: 500, Pids: 64}, have: all,
			want: &cgroups.Resources{SkipDevices: true, Memory: 256 << 20, PidsLimit: p(64),
				CpuQuota: 50000, CpuPeriod: 100000, CpuShares: 512, CpuWeight: cgroups.ConvertCPUSharesToCgroupV2Value(512)},
		},
		"zero tier leaves files alone": {
			have: all, want: &cgroups.Resources{SkipDevices: true},
		},
		"zero tier on reset clears limits": {
			have: all, reset: true,
			want: &cgroups.Resources{SkipDevices: true, Memory: -1, PidsLimit: p(-1),
				CpuQuota: -1, CpuPeriod: 100000, CpuShares: 1024, CpuWeight: 100},
		},
		"missing controllers are not written": {
			tier: Tier{MemoryBytes: 1 << 20, CPUMillis: 100, Pids: 8}, have: controllerSet{pids: true},
			want: &cgroups.Resources{SkipDevices: true, PidsLimit: p(8)},
		},
		"tiny cpu keeps the minimum weight": {
			tier: Tier{CPUMillis: 1}, have: all,
			want: &cgroups.Resources{SkipDevices: true, CpuQuota: 100, CpuPeriod: 100000, CpuShares: 2,
				CpuWeight: cgroups.ConvertCPUSharesToCgroupV2Value(2)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.tier.resources(tc.have, tc.reset)); diff != "" {
				t.Fatalf("resources (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTierMissing(t *testing.T) {
	got := Tier{MemoryBytes: 1, Pids: 1, CPUMillis: 1}.missing(controllerSet{cpu: true})
	if diff := cmp.Diff([]string{"memory", "pids"}, got); diff != "" {
		t.Fatalf("missing (-want,+got):\n%s", diff)
	}
}

// What a restarted agent's manager keeps of a parent while a generation
// runs: the looser of its tier and what the parent's files hold.
func TestKeptTier(t *testing.T) {
	tier := Tier{MemoryBytes: 64 << 20, CPUMillis: 500, Pids: 32}
	tests := map[string]struct {
		held Limits
		want Tier
	}{
		"a raise is kept": {
			held: Limits{MemoryBytes: 128 << 20, Pids: 64, CPUQuotaMicros: 100000, CPUPeriod: 100000, CPUWeight: 1024},
			want: Tier{MemoryBytes: 128 << 20, CPUMillis: 1000, Pids: 64},
		},
		"no limit held is kept": {
			held: Limits{MemoryBytes: Unlimited, Pids: Unlimited, CPUQuotaMicros: Unlimited, CPUPeriod: 100000},
			want: Tier{},
		},
		"a tier above what is held is written": {
			held: Limits{MemoryBytes: 32 << 20, Pids: 16, CPUQuotaMicros: 25000, CPUPeriod: 100000},
			want: tier,
		},
		"field by field": {
			held: Limits{MemoryBytes: 128 << 20, Pids: 16, CPUQuotaMicros: Unlimited, CPUPeriod: 100000},
			want: Tier{MemoryBytes: 128 << 20, Pids: 32},
		},
		"absent controllers hold no limit": {
			held: Limits{MemoryBytes: Absent, Pids: Absent, CPUQuotaMicros: Absent, CPUPeriod: Absent},
			want: Tier{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, higher(tier, tierOf(tc.held))); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
