package cgroups

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fixture reads files from a map (name → content), as a cgroup
// directory holding those files would.
func fixture(files map[string]string) fileReader {
	if files == nil {
		return nil
	}
	return func(file string) (string, error) {
		s, ok := files[file]
		if !ok {
			return "", &os.PathError{Op: "open", Path: file, Err: os.ErrNotExist}
		}
		return s, nil
	}
}

const v2MemoryStat = "anon 4096000\nfile 2000000\nactive_file 500000\ninactive_file 1500000\nslab 10000\n"

func TestReadV2Stats(t *testing.T) {
	tests := map[string]struct {
		files   map[string]string
		want    Stats
		wantErr bool
	}{
		"every controller": {
			files: map[string]string{
				"cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
				"memory.current": "6000000\n",
				"memory.stat":    v2MemoryStat,
				"memory.events":  "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n",
				"memory.max":     "67108864\n",
			},
			want: Stats{MemoryWorkingSetBytes: 4500000, CPUUsageNanos: 2500000000, OOMKills: 2, MemoryLimitBytes: 64 << 20},
		},
		"no limit, no kill": {
			files: map[string]string{
				"cpu.stat":       "usage_usec 0\n",
				"memory.current": "0\n",
				"memory.stat":    "inactive_file 0\n",
				"memory.events":  "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
				"memory.max":     "max\n",
			},
			want: Stats{MemoryLimitBytes: Unlimited},
		},
		"inactive file read after usage fell": {
			files: map[string]string{
				"cpu.stat":       "usage_usec 1\n",
				"memory.current": "1000000\n",
				"memory.stat":    v2MemoryStat,
				"memory.events":  "oom_kill 0\n",
				"memory.max":     "max\n",
			},
			want: Stats{CPUUsageNanos: 1000, MemoryLimitBytes: Unlimited},
		},
		"no memory controller": {
			files: map[string]string{"cpu.stat": "usage_usec 7\n"},
			want:  Stats{CPUUsageNanos: 7000, MemoryLimitBytes: Absent},
		},
		"garbled memory.events": {
			files: map[string]string{
				"cpu.stat":       "usage_usec 1\n",
				"memory.current": "1\n",
				"memory.stat":    "inactive_file 0\n",
				"memory.events":  "oom_kill many\n",
				"memory.max":     "max\n",
			},
			wantErr: true,
		},
		"no cpu.stat": {
			files:   map[string]string{"memory.current": "1\n"},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := readV2Stats(fixture(tc.files))
			if (err != nil) != tc.wantErr {
				t.Fatalf("readV2Stats error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stats (-want,+got):\n%s", diff)
			}
		})
	}
}

const v1MemoryStat = "cache 3000000\nrss 5000000\ninactive_file 100\ntotal_cache 3000000\ntotal_rss 5000000\ntotal_inactive_file 2000000\ntotal_active_file 1000000\n"

func TestReadV1Stats(t *testing.T) {
	memory := map[string]string{
		"memory.usage_in_bytes": "8000000\n",
		"memory.stat":           v1MemoryStat,
		"memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n",
		"memory.limit_in_bytes": "16777216\n",
	}
	tests := map[string]struct {
		memory, cpuacct map[string]string
		want            Stats
		wantErr         bool
	}{
		"memory and cpuacct": {
			memory:  memory,
			cpuacct: map[string]string{"cpuacct.usage": "123456789\n"},
			want:    Stats{MemoryWorkingSetBytes: 6000000, CPUUsageNanos: 123456789, OOMKills: 4, MemoryLimitBytes: 16 << 20},
		},
		"no limit (the page-rounded maximum)": {
			memory: map[string]string{
				"memory.usage_in_bytes": "0\n",
				"memory.stat":           "total_inactive_file 0\n",
				"memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\n",
				"memory.limit_in_bytes": "9223372036854771712\n",
			},
			want: Stats{MemoryLimitBytes: Unlimited},
		},
		"no memory hierarchy": {
			cpuacct: map[string]string{"cpuacct.usage": "5\n"},
			want:    Stats{CPUUsageNanos: 5, MemoryLimitBytes: Absent},
		},
		"garbled usage": {
			memory:  map[string]string{"memory.usage_in_bytes": "lots\n"},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := readV1Stats(fixture(tc.memory), fixture(tc.cpuacct))
			if (err != nil) != tc.wantErr {
				t.Fatalf("readV1Stats error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stats (-want,+got):\n%s", diff)
			}
		})
	}
}

// allocScript touches 64 MiB (dd's one block), far beyond a 16 MiB tier.
const allocScript = "dd if=/dev/zero of=/dev/null bs=64M count=1"

// On this host, a generation's usage is read from its real cgroup: the
// tier's limit, CPU time and memory while a process runs there, and the
// kernel's OOM kill once a process allocates beyond the limit.
func TestStatsOfARealGeneration(t *testing.T) {
	cfg := testConfig(t)
	tier := Tier{MemoryBytes: 16 << 20, Pids: 32}
	m := newManager(t, cfg, "stats", tier)
	g1, err := m.CreateGeneration(1, tier)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Stats(g1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{MemoryLimitBytes: 16 << 20}, st); diff != "" {
		t.Errorf("an empty generation's stats (-want,+got):\n%s", diff)
	}

	// A busy shell holding 4 MB it allocated in g1: CPU time and memory
	// while it runs (its pages from before the move stay charged where
	// they were).
	busy := spawnIn(t, m, g1, `x=$(head -c 4000000 /dev/zero | tr '\0' a); while :; do :; done`, 1)
	waitFor(t, "CPU time and a working set in g1", func() bool {
		st, err = m.Stats(g1)
		return err == nil && st.CPUUsageNanos > 0 && st.MemoryWorkingSetBytes > 0
	})
	t.Logf("g1: %+v", st)
	if st.OOMKills != 0 {
		t.Errorf("OOM kills before any allocation = %d, want 0", st.OOMKills)
	}

	// The busy shell goes first: an OOM at the Instance's level may pick
	// any process under it, and g1's must not be the one.
	_ = busy.cmd.Process.Kill()
	_ = busy.cmd.Wait()
	waitFor(t, "g1 empty", func() bool {
		pids, err := m.Pids(g1)
		return err == nil && len(pids) == 0
	})

	// An allocation beyond the limit is OOM-killed, and counted.
	g2, err := m.CreateGeneration(2, tier)
	if err != nil {
		t.Fatal(err)
	}
	h := startHeld(t, allocScript)
	if err := m.Place(h.pid(), g2); err != nil {
		t.Fatal(err)
	}
	h.release(t)
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) {
			t.Fatalf("the allocating shell ended with %v, want a failure", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the allocating shell did not end")
	}
	st, err = m.Stats(g2)
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills != 1 {
		t.Errorf("g2's OOM kills = %d, want 1 (%+v)", st.OOMKills, st)
	}
	if st, _ := m.Stats(g1); st.OOMKills != 0 {
		t.Errorf("g1's OOM kills = %d, want 0: the kill was in g2", st.OOMKills)
	}
	if _, err := m.Stats("g9"); !errors.Is(err, ErrNoChild) {
		t.Errorf("Stats of an absent child = %v, want ErrNoChild", err)
	}
}

// BenchmarkStats times one generation's Stats on this host's cgroups: a
// scrape reads one per generation, so 1000 Instances cost 1000 of these.
func BenchmarkStats(b *testing.B) {
	cfg := testConfig(b)
	tier := Tier{MemoryBytes: 64 << 20, Pids: 64}
	m := newManager(b, cfg, "bench", tier)
	g1, err := m.CreateGeneration(1, tier)
	if err != nil {
		b.Fatal(err)
	}
	spawnIn(b, m, g1, "exec sleep 1000", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Stats(g1); err != nil {
			b.Fatal(err)
		}
	}
}
