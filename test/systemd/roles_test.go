package systemd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestSidecars: two sidecars run as units of their own beside generation
// 1; the one whose process dies is started again while the other runs on
// untouched; the one dropped from the template is retired (its unit no
// longer active) while the other keeps running.
func TestSidecars(t *testing.T) {
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", testNode)
	inst.Name, inst.Spec.Host = "sided", "sided.example.com"
	names := []string{"ticker", "tocker"}
	for _, name := range names {
		inst.Spec.Template.Sidecars = append(inst.Spec.Template.Sidecars,
			v1.Sidecar{Name: name, Role: v1.Role{Command: []string{"/bin/sleep", "1000"}}})
	}
	create(t, inst)
	kube.WaitServing(t, inst.Name, 1)
	li := instanceLayout(t, inst.Name)
	c := busConn(t)
	unit := map[string]string{}
	first := map[string]uint32{}
	for _, name := range names {
		p, err := li.Sidecar(name)
		if err != nil {
			t.Fatal(err)
		}
		unit[name] = p.UnitName()
		testutil.Eventually(t, "sidecar "+name+" active", 30*time.Second, pollEvery, func() (bool, string) {
			var active string
			first[name], active = mainPID(t, c, unit[name])
			return active == "active" && first[name] != 0, active
		})
	}

	// Its main process dies (as systemd reports it): started again.
	if err := c.KillUnitWithTarget(context.Background(), unit["ticker"], sddbus.Main, int32(syscall.SIGKILL)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "ticker started again", 60*time.Second, pollEvery, func() (bool, string) {
		pid, active := mainPID(t, c, unit["ticker"])
		return active == "active" && pid != 0 && pid != first["ticker"], fmt.Sprintf("%s, main pid %d (first %d)", active, pid, first["ticker"])
	})
	if pid, active := mainPID(t, c, unit["tocker"]); active != "active" || pid != first["tocker"] {
		t.Errorf("tocker was touched by ticker's death: %s, main pid %d, first %d", active, pid, first["tocker"])
	}

	// Dropped from the template: retired, found by listing this Instance.
	kube.UpdateInstance(t, inst.Name, updateLimit, func(i *v1.Instance) {
		i.Spec.Template.Sidecars = slices.DeleteFunc(i.Spec.Template.Sidecars, func(s v1.Sidecar) bool { return s.Name == "tocker" })
	})
	kube.WaitServing(t, inst.Name, 2)
	testutil.Eventually(t, "tocker retired", 60*time.Second, pollEvery, func() (bool, string) {
		_, active := mainPID(t, c, unit["tocker"])
		return active == "inactive", active
	})
	if _, active := mainPID(t, c, unit["ticker"]); active != "active" {
		t.Errorf("ticker after tocker's retirement: %s, want active", active)
	}
	got := activeUnits(t, c, li)
	if !slices.Contains(got, unit["ticker"]+"=loaded/active") || slices.ContainsFunc(got, func(u string) bool { return strings.HasPrefix(u, unit["tocker"]+"=") }) {
		t.Errorf("the Instance's units not inactive: %v; want ticker's active, none of tocker's", got)
	}
}

// mainPID is a service's main pid and active state as systemd tells them.
func mainPID(t *testing.T, c *sddbus.Conn, unit string) (uint32, string) {
	t.Helper()
	_, active := unitState(t, c, unit)
	p, err := c.GetServicePropertyContext(context.Background(), unit, "MainPID")
	if err != nil {
		t.Fatalf("MainPID of %s: %v", unit, err)
	}
	pid, _ := p.Value.Value().(uint32)
	return pid, active
}
