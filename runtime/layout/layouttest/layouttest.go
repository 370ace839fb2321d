// Package layouttest gives a test a node layout of its own (state root,
// run root and cgroup root that no other test or run shares) and sweeps
// what runs that died left behind. Tests of the runtime packages that
// start real processes share it.
package layouttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// RunParent holds the run roots (a tmpfs, as /run is on a host, with
// paths short enough for unix sockets) and the state roots.
const RunParent = "/dev/shm"

// ExeParent holds the copies of test binaries that apps run: not below
// /tmp or /dev, which every app's sandbox replaces with private ones.
const ExeParent = "/run"

// staleAfter is older than any run of a test could be.
const staleAfter = 15 * time.Minute

// New makes roots named prefix plus a random suffix: a run root and a
// state root under RunParent and the cgroup root of that name.
// When t ends, the cgroup root is swept (every process killed and proven
// gone, else t fails) and the run root removed. Not as root, t is
// skipped.
func New(t testing.TB, prefix string) layout.Layout {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test starts real processes in real cgroups")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := prefix + hex.EncodeToString(rnd[:])
	run := filepath.Join(RunParent, name)
	// Search-only for others, as a node's run root: an app's own uid
	// passes through to its run dir.
	if err := os.Mkdir(run, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o711); err != nil { // whatever the umask
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		proofs, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, name, nil)
		if err != nil {
			t.Errorf("cleanup of %s: %v", name, err)
		}
		for _, p := range proofs {
			if !p.Proven {
				t.Errorf("cleanup of %s: %v", name, p.Error())
			}
		}
		_ = os.RemoveAll(run)
	})
	// The state root is beside it, not in t's temp dir: an app's sandbox
	// has a /tmp of its own, where another Instance's data dir would be
	// missing rather than refused, as it is on a node.
	state := run + "-state"
	if err := os.Mkdir(state, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	return layout.Layout{StateRoot: state, RunRoot: run, CgroupRoot: name}
}

// Exe is a copy of the running test binary that an app in the sandbox can
// run: in a dir of its own under ExeParent, open to every uid, since an
// app sees neither the host's /tmp (where go test builds) nor its /dev, nor, as its own
// unprivileged uid, a dir only root may enter. Removed when t ends.
func Exe(t testing.TB, prefix string) string {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(ExeParent, prefix+"exe-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// SweepOld removes the cgroup roots and run roots named prefix that runs
// which died left behind, leaving those of concurrent runs alone. It is
// for TestMain, so it reports to stderr.
func SweepOld(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keep := func(name string) bool {
		fi, err := os.Stat(filepath.Join(cgroups.DefaultMountRoot, "memory", name))
		return err == nil && time.Since(fi.ModTime()) < staleAfter
	}
	if proofs, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, prefix, keep); err != nil || len(proofs) > 0 {
		fmt.Fprintf(os.Stderr, "swept %d stale test cgroups (err %v)\n", len(proofs), err)
	}
	runs, _ := filepath.Glob(filepath.Join(RunParent, prefix+"*"))
	for _, r := range runs {
		if fi, err := os.Stat(r); err == nil && time.Since(fi.ModTime()) > staleAfter {
			_ = os.RemoveAll(r)
		}
	}
}

// OwnCgroup is a cgroup this process (and what it starts) is in, other
// than a hierarchy's root: the activation hand-off serves only a caller
// in its unit's cgroup. Without one, t fails: every machine the suites
// run on places its processes below some hierarchy's root, and a skip
// would hide the hand-off's cgroup check.
func OwnCgroup(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(l, ":", 3); len(parts) == 3 && parts[2] != "/" {
			return parts[2]
		}
	}
	t.Fatal("this process is in every hierarchy's root cgroup: no cgroup tells a unit's trampoline from another caller")
	return ""
}
