package units

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/layout/layouttest"
)

// directPrefix names every cgroup root and run root the direct tests
// create, distinct from other packages' tests.
const directPrefix = "unitlet-test-units-"

// dEnv is a direct backend's world: a cgroup root, a state root and a
// run root of the test's own, removed (processes killed) at the end.
type dEnv struct {
	lay layout.Layout
	exe string
}

func newDEnv(t testing.TB) *dEnv {
	t.Helper()
	lay := layouttest.New(t, directPrefix)
	return &dEnv{lay: lay, exe: layouttest.Exe(t, directPrefix)}
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
	// No idle shim outlives the test.
	t.Cleanup(b.Close)
	return b
}

// hostCgroup is cg in one v1 hierarchy of the host.
func hostCgroup(hierarchy, cg string) string {
	return filepath.Join(cgroups.DefaultMountRoot, hierarchy, cg)
}
