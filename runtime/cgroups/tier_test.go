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
