package systemd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testenv"
	"github.com/unitlet/unitlet/runtime/layout"
)

// sample reads one of config/samples as a user would apply it, on testNode.
func sample(t *testing.T, file string) *v1.Instance {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	inst := &v1.Instance{}
	if err := yaml.UnmarshalStrict(raw, inst); err != nil {
		t.Fatalf("sample %s: %v", file, err)
	}
	inst.Spec.NodeName = testNode
	return inst
}

// create applies inst and, when the test ends, deletes it and waits until
// the reconcilers released it (every unit proven gone), also on failure.
func create(t *testing.T, inst *v1.Instance) {
	t.Helper()
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	name := inst.Name
	t.Cleanup(func() { deleteAndWait(t, name) })
}

func eventually(t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", limit, what, last)
}

func getInstance(t *testing.T, name string) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return inst
}

func getGeneration(t *testing.T, inst string, n int64) *v1.Generation {
	t.Helper()
	g := &v1.Generation{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-g%d", inst, n)}, g); err != nil {
		t.Fatalf("get generation %d of %s: %v", n, inst, err)
	}
	return g
}

func conditions(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}

// waitServing waits for Ready=True with generation active serving.
func waitServing(t *testing.T, name string, active int64) *v1.Instance {
	t.Helper()
	var inst *v1.Instance
	eventually(t, fmt.Sprintf("%s serving generation %d", name, active), 90*time.Second, func() (bool, string) {
		inst = getInstance(t, name)
		return inst.Status.ActiveGeneration == active && meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady),
			fmt.Sprintf("active=%d %s", inst.Status.ActiveGeneration, conditions(inst.Status.Conditions))
	})
	return inst
}

// waitTerminated waits until generation n's Terminated condition is True
// (its kill proven).
func waitTerminated(t *testing.T, name string, n int64) *v1.Generation {
	t.Helper()
	var g *v1.Generation
	eventually(t, fmt.Sprintf("generation %d of %s proven gone", n, name), 60*time.Second, func() (bool, string) {
		g = getGeneration(t, name, n)
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated), conditions(g.Status.Conditions)
	})
	return g
}

// unixClient sends HTTP over a unix socket, dialling afresh for every
// request: each request follows the stable symlink as it is then.
func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// get sends GET path through c and returns the body of a 200 answer.
func get(c *http.Client, path string) (string, error) {
	resp, err := c.Get("http://instance" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}

func updateInstance(t *testing.T, name string, mutate func(*v1.Instance)) {
	t.Helper()
	eventually(t, "update of "+name, 10*time.Second, func() (bool, string) {
		inst := getInstance(t, name)
		mutate(inst)
		err := k8s.Update(context.Background(), inst)
		return err == nil, fmt.Sprint(err)
	})
}

// deleteAndWait deletes an Instance and waits until its lease is released.
func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	inst := &v1.Instance{}
	inst.Namespace, inst.Name = "default", name
	if err := k8s.Delete(context.Background(), inst); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, name+" deleted", 90*time.Second, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(inst), inst)
		return client.IgnoreNotFound(err) == nil && err != nil, conditions(inst.Status.Conditions)
	})
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
func proc(t *testing.T, li layout.Instance, n uint64) layout.Proc {
	t.Helper()
	p, err := li.Generation(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// busConn is a D-Bus connection of the test's own to the booted systemd.
func busConn(t *testing.T) *sddbus.Conn {
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
