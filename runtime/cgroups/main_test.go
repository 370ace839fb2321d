package cgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Environment that turns the test binary into a helper process.
const (
	// envV2 marks the re-exec that runs TestV2 inside its own mount and
	// cgroup namespace with cgroup2 mounted on /sys/fs/cgroup.
	envV2 = "UNITLET_CGTEST_V2"
	// envShim marks the re-exec that places itself (os.Getpid) into a
	// child and then execs sleep, as a shim does. Its value is
	// "<mount root>|<root>|<namespace>|<name>|<child>".
	envShim = "UNITLET_CGTEST_SHIM"
)

// testPrefix names every cgroup root the tests here create, distinct from
// other packages' tests that may run at the same time.
const testPrefix = "unitlet-test-cg-"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envShim); spec != "" {
		os.Exit(shimMain(spec))
	}
	if os.Getenv(envV2) == "1" {
		if err := enterPrivateV2(); err != nil {
			fmt.Fprintln(os.Stderr, "v2 namespace:", err)
			os.Exit(3)
		}
	} else if os.Geteuid() == 0 {
		sweepOldTestRoots()
	}
	os.Exit(m.Run())
}

// enterPrivateV2 runs in the re-exec whose mount and cgroup namespaces are
// its own (Unshareflags; Go made / private): it mounts cgroup2 on
// /sys/fs/cgroup, so the fresh cgroup it was started in is the root of a
// pure v2 layout, then moves itself to a leaf (a non-root cgroup with
// processes could not delegate controllers to its children).
func enterPrivateV2() error {
	if err := unix.Mount("cgroup2", DefaultMountRoot, "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	leaf := filepath.Join(DefaultMountRoot, "init")
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

// sweepOldTestRoots removes leftovers of earlier runs of these tests that
// are older than any run could be, leaving concurrent runs alone.
func sweepOldTestRoots() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Root: "."}
	_, h, err := detect("")
	if err != nil {
		return
	}
	old := func(name string) bool {
		for _, mp := range h {
			if fi, err := os.Stat(filepath.Join(mp, name)); err == nil {
				return time.Since(fi.ModTime()) < 15*time.Minute
			}
		}
		return false
	}
	if proofs, err := SweepStale(ctx, cfg, testPrefix, old); err != nil || len(proofs) > 0 {
		fmt.Fprintf(os.Stderr, "swept %d stale test cgroups (err %v)\n", len(proofs), err)
	}
}

// shimMain is a shim's first act: enter the child, then exec.
func shimMain(spec string) int {
	var mount, root, ns, name, child string
	parts := splitN(spec, '|', 5)
	if len(parts) != 5 {
		return 2
	}
	mount, root, ns, name, child = parts[0], parts[1], parts[2], parts[3], parts[4]
	m, err := New(Config{MountRoot: mount, Root: root}, ns, name)
	if err == nil {
		err = m.Place(os.Getpid(), child)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 4
	}
	err = syscall.Exec("/bin/sleep", []string{"sleep", "1000"}, os.Environ())
	fmt.Fprintln(os.Stderr, "shim exec:", err)
	return 5
}

func splitN(s string, sep byte, n int) []string {
	var out []string
	for len(out) < n-1 {
		i := -1
		for j := 0; j < len(s); j++ {
			if s[j] == sep {
				i = j
				break
			}
		}
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return append(out, s)
}
