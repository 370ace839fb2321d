package machine

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
)

// fakeProc writes a proc tree with the given meminfo, pid_max and
// threads-max ("" leaves the file out).
func fakeProc(t *testing.T, meminfo, pidMax, threadsMax string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sys", "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"meminfo": meminfo, "sys/kernel/pid_max": pidMax, "sys/kernel/threads-max": threadsMax} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const meminfo = "MemTotal:        8048576 kB\nMemFree:          123456 kB\n"

func TestRead(t *testing.T) {
	absent := cgroups.Limits{MemoryBytes: cgroups.Absent, Pids: cgroups.Absent, CPUQuotaMicros: cgroups.Absent, CPUPeriod: cgroups.Absent, CPUWeight: cgroups.Absent}
	tests := map[string]struct {
		meminfo, pidMax, threadsMax string
		cpus                        int
		root                        *cgroups.Limits
		rootErr                     error
		want                        Capacity
		wantErr                     string
	}{
		"the machine alone": {
			meminfo: meminfo, pidMax: "4194304\n", threadsMax: "62811\n", cpus: 2,
			want: Capacity{MemoryBytes: 8048576 * 1024, CPUMillis: 2000, Pids: 62811},
		},
		"pid_max below threads-max": {
			meminfo: meminfo, pidMax: "32768\n", threadsMax: "62811\n", cpus: 4,
			want: Capacity{MemoryBytes: 8048576 * 1024, CPUMillis: 4000, Pids: 32768},
		},
		"a root without limits bounds nothing": {
			meminfo: meminfo, pidMax: "32768", threadsMax: "62811", cpus: 2, root: &absent,
			want: Capacity{MemoryBytes: 8048576 * 1024, CPUMillis: 2000, Pids: 32768},
		},
		"a root with unlimited files bounds nothing": {
			meminfo: meminfo, pidMax: "32768", threadsMax: "62811", cpus: 2,
			root: &cgroups.Limits{MemoryBytes: cgroups.Unlimited, Pids: cgroups.Unlimited, CPUQuotaMicros: cgroups.Unlimited, CPUPeriod: 100000},
			want: Capacity{MemoryBytes: 8048576 * 1024, CPUMillis: 2000, Pids: 32768},
		},
		"the root's limits bound the machine": {
			meminfo: meminfo, pidMax: "32768", threadsMax: "62811", cpus: 2,
			root: &cgroups.Limits{MemoryBytes: 1 << 30, Pids: 500, CPUQuotaMicros: 150000, CPUPeriod: 100000},
			want: Capacity{MemoryBytes: 1 << 30, CPUMillis: 1500, Pids: 500},
		},
		"a root limit above the machine changes nothing": {
			meminfo: meminfo, pidMax: "32768", threadsMax: "62811", cpus: 2,
			root: &cgroups.Limits{MemoryBytes: 1 << 40, Pids: 1 << 22, CPUQuotaMicros: 800000, CPUPeriod: 100000},
			want: Capacity{MemoryBytes: 8048576 * 1024, CPUMillis: 2000, Pids: 32768},
		},
		"unreadable root": {
			meminfo: meminfo, pidMax: "32768", threadsMax: "62811", cpus: 2, rootErr: errors.New("permission denied"),
			wantErr: "cgroup root limits: permission denied",
		},
		"no MemTotal": {
			meminfo: "MemFree: 1 kB\n", pidMax: "32768", threadsMax: "62811", cpus: 2,
			wantErr: "has no MemTotal",
		},
		"MemTotal not in kB": {
			meminfo: "MemTotal: 1 MB\n", pidMax: "32768", threadsMax: "62811", cpus: 2,
			wantErr: `MemTotal " 1 MB" is not in kB`,
		},
		"pid_max not a number": {
			meminfo: meminfo, pidMax: "lots", threadsMax: "62811", cpus: 2,
			wantErr: `holds "lots", not a count`,
		},
		"no threads-max": {
			meminfo: meminfo, pidMax: "32768", cpus: 2,
			wantErr: "threads-max: no such file or directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Sources{Proc: fakeProc(t, tc.meminfo, tc.pidMax, tc.threadsMax), CPUs: func() int { return tc.cpus }}
			if tc.root != nil || tc.rootErr != nil {
				s.RootLimits = func() (cgroups.Limits, error) {
					if tc.rootErr != nil {
						return cgroups.Limits{}, tc.rootErr
					}
					return *tc.root, nil
				}
			}
			got, err := Read(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v (capacity %+v)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("capacity (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReadThisMachine reads the real /proc: every figure is there.
func TestReadThisMachine(t *testing.T) {
	got, err := Read(Sources{CPUs: runtime.NumCPU})
	if err != nil {
		t.Fatal(err)
	}
	if got.MemoryBytes <= 0 || got.CPUMillis < 1000 || got.Pids <= 0 {
		t.Errorf("capacity of this machine has an empty figure: %+v", got)
	}
}
