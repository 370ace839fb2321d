package join

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/systemdboot"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the guard checks owners, cgroups and the system bus as the agent (root) does")
	}
}

// goodGuard is a guard whose roots are fresh directories with RootMode
// and whose cgroup root is a fresh cgroup of the test's own, removed at
// the end.
func goodGuard(t *testing.T) Guard {
	t.Helper()
	base := t.TempDir()
	g := Guard{
		CgroupRoot:  fmt.Sprintf("jointest-%d-%s", os.Getpid(), filepath.Base(base)),
		StateRoot:   filepath.Join(base, "state"),
		RunRoot:     filepath.Join(base, "run"),
		SocketGroup: "root",
		UID:         os.Geteuid(),
	}
	t.Cleanup(func() { removeCgroupRoot(t, g) })
	if err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	return g
}

func removeCgroupRoot(t *testing.T, g Guard) {
	_, dirs, err := g.cgroupDirs()
	if err != nil {
		return
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove test cgroup: %v", err)
		}
	}
}

func byName(checks []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

func TestGuardPreparedPasses(t *testing.T) {
	needRoot(t)
	g := goodGuard(t)
	checks := g.Check(context.Background())
	if armed, failing := Armed(checks); !armed {
		t.Fatalf("prepared guard not armed: %s", failing)
	}
	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
	}
	want := []string{CheckCgroupRoot, CheckStateRoot, CheckRunRoot, CheckSocketGroup, CheckOpenat2}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("checks %v, want %v (no bus check without the systemd backend)", names, want)
	}
	for _, dir := range []string{g.StateRoot, g.RunRoot} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != RootMode {
			t.Errorf("%s created with mode %v, want %o", dir, fi.Mode().Perm(), RootMode)
		}
	}
}

func TestGuardFailures(t *testing.T) {
	needRoot(t)
	tests := map[string]struct {
		breakIt   func(t *testing.T, g *Guard)
		check     string
		wantInMsg string
	}{
		"state root missing": {
			breakIt:   func(t *testing.T, g *Guard) { rm(t, g.StateRoot) },
			check:     CheckStateRoot,
			wantInMsg: "no such file",
		},
		"run root writable by others": {
			breakIt:   func(t *testing.T, g *Guard) { chmod(t, g.RunRoot, 0o777) },
			check:     CheckRunRoot,
			wantInMsg: "group or others may write it",
		},
		"state root closed to others": {
			breakIt:   func(t *testing.T, g *Guard) { chmod(t, g.StateRoot, 0o700) },
			check:     CheckStateRoot,
			wantInMsg: "others cannot pass through",
		},
		"run root owned by someone else": {
			breakIt: func(t *testing.T, g *Guard) {
				if err := os.Chown(g.RunRoot, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			},
			check:     CheckRunRoot,
			wantInMsg: "owned by uid 65534",
		},
		"run root through a symlink": {
			breakIt: func(t *testing.T, g *Guard) {
				link := filepath.Join(filepath.Dir(g.RunRoot), "link")
				if err := os.Symlink(g.RunRoot, link); err != nil {
					t.Fatal(err)
				}
				g.RunRoot = link
			},
			check:     CheckRunRoot,
			wantInMsg: "symlink",
		},
		"relative state root": {
			breakIt:   func(t *testing.T, g *Guard) { g.StateRoot = "state" },
			check:     CheckStateRoot,
			wantInMsg: "not an absolute path",
		},
		"socket group unknown": {
			breakIt:   func(t *testing.T, g *Guard) { g.SocketGroup = "unitlet-no-such-group" },
			check:     CheckSocketGroup,
			wantInMsg: "groupadd --system unitlet-no-such-group",
		},
		"socket group gid negative": {
			breakIt:   func(t *testing.T, g *Guard) { g.SocketGroup = "-3" },
			check:     CheckSocketGroup,
			wantInMsg: "negative",
		},
		"socket group not configured": {
			breakIt:   func(t *testing.T, g *Guard) { g.SocketGroup = "" },
			check:     CheckSocketGroup,
			wantInMsg: "no socket group",
		},
		"cgroup root missing": {
			breakIt:   func(t *testing.T, g *Guard) { removeCgroupRoot(t, *g) },
			check:     CheckCgroupRoot,
			wantInMsg: "no such file",
		},
		"no cgroup file system": {
			breakIt:   func(t *testing.T, g *Guard) { g.CgroupMountRoot = t.TempDir() },
			check:     CheckCgroupRoot,
			wantInMsg: "no delegated cgroup hierarchy",
		},
		"cgroup root escapes the hierarchy": {
			breakIt:   func(t *testing.T, g *Guard) { g.CgroupRoot = "../x" },
			check:     CheckCgroupRoot,
			wantInMsg: "relative path below",
		},
		"systemd bus absent": {
			breakIt: func(t *testing.T, g *Guard) {
				g.Systemd = true
				g.BusAddress = "unix:path=" + filepath.Join(t.TempDir(), "no-bus")
			},
			check:     CheckSystemdBus,
			wantInMsg: "no-bus",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := goodGuard(t)
			tc.breakIt(t, &g)
			checks := g.Check(context.Background())
			c, ok := byName(checks)[tc.check]
			if !ok {
				t.Fatalf("no %s check in %+v", tc.check, checks)
			}
			if c.Passed || !strings.Contains(c.Message, tc.wantInMsg) {
				t.Errorf("%s = %+v, want failed with %q", tc.check, c, tc.wantInMsg)
			}
			armed, failing := Armed(checks)
			if armed || !strings.Contains(failing, tc.check+": ") {
				t.Errorf("Armed = %v, %q: want not armed naming %s", armed, failing, tc.check)
			}
		})
	}
}

func TestPrepareLeavesExistingRootsAlone(t *testing.T) {
	needRoot(t)
	g := goodGuard(t)
	chmod(t, g.StateRoot, 0o777)
	if err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(g.StateRoot)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o777 {
		t.Errorf("Prepare changed an existing root's mode to %v", fi.Mode().Perm())
	}
}

func TestPrepareRecreatesMissing(t *testing.T) {
	needRoot(t)
	g := goodGuard(t)
	rm(t, g.RunRoot)
	removeCgroupRoot(t, g)
	if armed, _ := Armed(g.Check(context.Background())); armed {
		t.Fatal("armed with the run root and cgroup root gone")
	}
	if err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	if armed, failing := Armed(g.Check(context.Background())); !armed {
		t.Errorf("not armed after Prepare: %s", failing)
	}
}

func TestSystemdBusReachable(t *testing.T) {
	needRoot(t)
	sys := systemdboot.Boot(t)
	g := goodGuard(t)
	g.Systemd = true
	g.BusAddress = "unix:path=" + sys.BusSocket()
	c := byName(g.Check(context.Background()))[CheckSystemdBus]
	if !c.Passed || !strings.Contains(c.Message, "systemd ") {
		t.Errorf("bus check = %+v, want passed naming systemd's version", c)
	}
}

func TestCgroupMode(t *testing.T) {
	g := Guard{CgroupMountRoot: t.TempDir()}
	if got := g.CgroupMode(); got != "none" {
		t.Errorf("CgroupMode of a plain dir = %q, want none", got)
	}
}

func rm(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}
