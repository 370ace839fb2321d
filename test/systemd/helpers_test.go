package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// create applies inst and, when the test ends, deletes it and waits until
// the reconcilers released it (every unit proven gone), also on failure.
func create(t *testing.T, inst *v1.Instance) {
	t.Helper()
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	name := inst.Name
	t.Cleanup(func() { kube.DeleteAndWait(t, name, deleteLimit) })
}

// waitTerminated waits until generation n's Terminated condition is True
// (its kill proven).
func waitTerminated(t *testing.T, name string, n int64) *v1.Generation {
	t.Helper()
	var g *v1.Generation
	testutil.Eventually(t, fmt.Sprintf("generation %d of %s proven gone", n, name), 60*time.Second, pollEvery, func() (bool, string) {
		g = kube.Generation(t, name, n)
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated), testutil.Conditions(g.Status.Conditions)
	})
	return g
}

// instanceLayout is where name's dirs, units and slice are.
func instanceLayout(t *testing.T, name string) layout.Instance {
	t.Helper()
	li, err := lay.Instance("default", name)
	if err != nil {
		t.Fatal(err)
	}
	return li
}

// proc is generation n's process slot of li.
func proc(t *testing.T, li layout.Instance, n int64) layout.Slot {
	t.Helper()
	p, err := li.Generation(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// busConn is a D-Bus connection of the test's own to the booted systemd.
func busConn(t testing.TB) *sddbus.Conn {
	t.Helper()
	c, err := sys.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// unitState reads a unit's load and active state as systemd tells them.
func unitState(t *testing.T, c *sddbus.Conn, unit string) (load, active string) {
	t.Helper()
	props, err := c.GetUnitPropertiesContext(context.Background(), unit)
	if err != nil {
		t.Fatalf("properties of %s: %v", unit, err)
	}
	load, _ = props["LoadState"].(string)
	active, _ = props["ActiveState"].(string)
	return load, active
}

// activeUnits lists the units of li that systemd holds in any state but
// inactive (the instance's services and its slice).
func activeUnits(t *testing.T, c *sddbus.Conn, li layout.Instance) []string {
	t.Helper()
	stem := strings.TrimSuffix(li.SliceName(), ".slice")
	us, err := c.ListUnitsByPatternsContext(context.Background(), nil, []string{stem + "-*.service", li.SliceName()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range us {
		if u.ActiveState != "inactive" {
			out = append(out, u.Name+"="+u.LoadState+"/"+u.ActiveState)
		}
	}
	return out
}

// sliceCgroup is the instance slice's cgroup as systemd names it ("" when
// the slice has none).
func sliceCgroup(t *testing.T, c *sddbus.Conn, li layout.Instance) string {
	t.Helper()
	props, err := c.GetUnitTypePropertiesContext(context.Background(), li.SliceName(), "Slice")
	if err != nil {
		t.Fatalf("slice properties of %s: %v", li.SliceName(), err)
	}
	cg, _ := props["ControlGroup"].(string)
	return cg
}

// processesUnder counts the processes in a cgroup subtree, in every
// hierarchy of the booted systemd.
func processesUnder(t *testing.T, cgroup string) int {
	t.Helper()
	n := 0
	for _, dir := range hostCgroupDirs(cgroup) {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil {
				n += len(strings.Fields(string(b)))
			}
			return nil
		})
	}
	return n
}
