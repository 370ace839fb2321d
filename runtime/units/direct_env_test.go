package units

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
)

// directPrefix names every cgroup root and run root the direct tests
// create, distinct from other packages' tests.
const directPrefix = "unitlet-test-units-"

// directRunParent holds the run roots: a tmpfs, as /run is on a host.
const directRunParent = "/dev/shm"

// dEnv is a direct backend's world: a cgroup root, a state root and a
// run root of the test's own, removed (processes killed) at the end.
type dEnv struct {
	lay layout.Layout
	exe string
}

func newDEnv(t testing.TB) *dEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the direct backend creates real cgroups")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := directPrefix + hex.EncodeToString(rnd[:])
	run := filepath.Join(directRunParent, name)
	if err := os.Mkdir(run, 0o750); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := &dEnv{lay: layout.Layout{StateRoot: t.TempDir(), RunRoot: run, CgroupRoot: name}, exe: exe}
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
	return e
}

func (e *dEnv) config(budget time.Duration, t testing.TB) DirectConfig {
	return DirectConfig{Layout: e.lay, Exe: e.exe, ProofBudget: budget, Log: testr.NewWithInterface(t, testr.Options{})}
}

func (e *dEnv) backend(t testing.TB, budget time.Duration) *Direct {
	t.Helper()
	b, err := NewDirect(e.config(budget, t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostCgroup is cg in one v1 hierarchy of the host.
func hostCgroup(hierarchy, cg string) string {
	return filepath.Join(cgroups.DefaultMountRoot, hierarchy, cg)
}

// sweepOldDirectRoots removes what runs of these tests that died left
// behind (older than any run could be), leaving concurrent runs alone.
func sweepOldDirectRoots() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keep := func(name string) bool {
		fi, err := os.Stat(hostCgroup("memory", name))
		return err == nil && time.Since(fi.ModTime()) < 15*time.Minute
	}
	if proofs, err := cgroups.SweepStale(ctx, cgroups.Config{Root: "."}, directPrefix, keep); err != nil || len(proofs) > 0 {
		fmt.Fprintf(os.Stderr, "swept %d stale test cgroups (err %v)\n", len(proofs), err)
	}
	runs, _ := filepath.Glob(filepath.Join(directRunParent, directPrefix+"*"))
	for _, r := range runs {
		if fi, err := os.Stat(r); err == nil && time.Since(fi.ModTime()) > 15*time.Minute {
			_ = os.RemoveAll(r)
		}
	}
}
