package cgroups

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestV2 runs the cgroup v2 code path for real. On the host it starts
// this test binary again in a fresh cgroup of its own with private mount
// and cgroup namespaces (TestMain then mounts cgroup2 on /sys/fs/cgroup,
// a pure v2 layout); there, the same test runs testV2Inside.
func TestV2(t *testing.T) {
	if os.Getenv(envV2) == "1" {
		testV2Inside(t)
		return
	}
	out, err := runInV2(t, "-test.run=^TestV2$", "-test.v", "-test.count=1")
	t.Logf("inside the v2 namespace:\n%s", out)
	if err != nil {
		t.Fatalf("v2 run: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestV2") {
		t.Fatal("the v2 run did not pass TestV2")
	}
}

// runInV2 runs this test binary with args in a fresh cgroup of its own,
// with private mount and cgroup namespaces; TestMain there mounts cgroup2
// on /sys/fs/cgroup.
func runInV2(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	cfg := testConfig(t) // its cleanup kills and removes the fresh cgroup
	_, h, err := detect("")
	if err != nil {
		t.Fatal(err)
	}
	unified, ok := h[""]
	if !ok {
		t.Fatal("no cgroup2 hierarchy on this host to start a v2 namespace in")
	}
	fresh := filepath.Join(unified, cfg.Root)
	if err := os.Mkdir(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envV2+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		UseCgroupFD:  true, // started into the fresh cgroup (CLONE_INTO_CGROUP) ...
		CgroupFD:     int(dir.Fd()),
		Unshareflags: unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP, // ... which becomes its namespace root
		Pdeathsig:    syscall.SIGKILL,
	}
	return cmd.CombinedOutput()
}

// testV2Inside: a pure v2 layout whose root is a cgroup of this test's
// own. cgroup2 here has no memory, pids or cpu controller (the host gives
// its unified hierarchy only hugetlb), so limits are asserted only where a
// controller exists and are otherwise read back Absent; a raise is refused
// with ErrNoDelegation rather than pretended. Placement, cgroup.events,
// cgroup.kill and the empty proof are all real.
func testV2Inside(t *testing.T) {
	mode, err := DetectMode("")
	if err != nil || mode != ModeV2 {
		t.Fatalf("DetectMode = %v, %v; want v2", mode, err)
	}
	cfg := testConfig(t)
	tier := Tier{MemoryBytes: 64 << 20, CPUMillis: 250, Pids: 256}
	m := newManager(t, cfg, "v2", tier)
	g1, err := m.CreateGeneration(1, tier)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := m.CreateGeneration(2, tier)
	sidecar, _ := m.CreateRole(sidecarChild(t, "side"))

	t.Run("limits where a controller exists", func(t *testing.T) {
		have := m.(*instance).d.controllers(path.Join(m.Parent(), g1))
		l, err := m.Limits(g1)
		if err != nil {
			t.Fatal(err)
		}
		check := func(name string, on bool, got, want int64) {
			if !on {
				want = Absent
			}
			if got != want {
				t.Errorf("%s = %d, want %d (controller present: %v)", name, got, want, on)
			}
		}
		check("memory", have.memory, l.MemoryBytes, tier.MemoryBytes)
		check("pids", have.pids, l.Pids, tier.Pids)
		check("cpu quota", have.cpu, l.CPUQuotaMicros, 25000)
		t.Logf("controllers here: %+v", have)

		err = m.RaiseParent(Tier{MemoryBytes: 128 << 20, Pids: 512})
		if have.memory && have.pids {
			if err != nil {
				t.Errorf("RaiseParent = %v", err)
			}
		} else if !errors.Is(err, ErrNoDelegation) {
			t.Errorf("RaiseParent without memory/pids controllers = %v, want ErrNoDelegation", err)
		}
	})

	tree := spawnIn(t, m, g1, treeScript, 101)
	sibling := spawnIn(t, m, g2, "exec sleep 1000", 1)
	side := spawnIn(t, m, sidecar, "exec sleep 1000", 1)
	victims, _ := m.Pids(g1)
	_ = tree

	t.Run("placement and populated", func(t *testing.T) {
		if got, want := procCgroups(t, side.pid())[""], "/"+path.Join(m.Parent(), sidecar); got != want {
			t.Errorf("sidecar in %s, want %s", got, want)
		}
		ev := readFile(t, DefaultMountRoot, m.Parent(), g1, "cgroup.events")
		if !strings.Contains(ev, "populated 1") {
			t.Errorf("g1 cgroup.events = %q", ev)
		}
	})

	t.Run("stats from cpu.stat and the memory files", func(t *testing.T) {
		have := m.(*instance).d.controllers(path.Join(m.Parent(), g1))
		var st Stats
		waitFor(t, "CPU time in g1", func() bool {
			var err error
			st, err = m.Stats(g1)
			return err == nil && st.CPUUsageNanos > 0
		})
		want := Absent
		if have.memory {
			want = tier.MemoryBytes
		}
		if st.MemoryLimitBytes != want || st.OOMKills != 0 {
			t.Errorf("g1 stats = %+v, want memory limit %d and no OOM kill", st, want)
		}
	})

	t.Run("cgroup.kill proves g1 empty, siblings run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if p := m.KillAndEmpty(ctx, g1); !p.Proven {
			t.Fatalf("KillAndEmpty(g1): %v", p.Error())
		}
		ev := readFile(t, DefaultMountRoot, m.Parent(), g1, "cgroup.events")
		if !strings.Contains(ev, "populated 0") {
			t.Errorf("g1 cgroup.events after proof = %q", ev)
		}
		for _, pid := range victims {
			if alive(pid) {
				t.Errorf("pid %d of g1 still running", pid)
			}
		}
		if !alive(sibling.pid()) || !alive(side.pid()) {
			t.Errorf("sibling alive %v, sidecar alive %v; want both", alive(sibling.pid()), alive(side.pid()))
		}
	})

	t.Run("a killed child is never reused", func(t *testing.T) {
		if _, err := m.CreateGeneration(1, tier); !errors.Is(err, ErrChildExists) {
			t.Fatalf("CreateGeneration(1) over a killed g1 = %v, want ErrChildExists", err)
		}
		if err := m.RemoveChild(g1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.CreateGeneration(1, tier); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("inotify watch fires on exit", func(t *testing.T) {
		if m.(*instance).d.eventsFile(path.Join(m.Parent(), g2)) == "" {
			t.Fatal("v2 has cgroup.events to watch")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, err := m.WatchEmpty(ctx, g2)
		if err != nil {
			t.Fatal(err)
		}
		_ = sibling.cmd.Process.Kill()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not fire")
		}
	})

	t.Run("discover", func(t *testing.T) {
		found, err := Discover(cfg)
		if err != nil || len(found) != 1 || found[0].Parent != m.Parent() {
			t.Fatalf("Discover = %+v, %v", found, err)
		}
	})
}
