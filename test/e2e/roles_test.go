package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestSeedAndSidecar: the seed runs once, before the first generation, on
// the real node; two sidecars run beside the generation, each in its own
// cgroup child, and the one that dies is started again while the other
// runs on untouched.
func TestSeedAndSidecar(t *testing.T) {
	a := startAgent(t, "e2e-roles")
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name = "roles"
	// The seed leaves a mark; the app refuses to serve without it, so a
	// generation that started before the seed finished could never be Ready.
	inst.Spec.Template.Seed = &v1.Role{Command: []string{"/bin/sh", "-c",
		`sleep 1; echo seeded > "$UNITLET_DATA_DIR/seeded"`}}
	inst.Spec.Template.Args[1] = "import os, sys\n" +
		"sys.exit(4) if not os.path.exists(os.path.join(os.environ['UNITLET_DATA_DIR'], 'seeded')) else None\n" +
		inst.Spec.Template.Args[1]
	sidecars := []string{"ticker", "tocker"}
	for _, name := range sidecars {
		inst.Spec.Template.Sidecars = append(inst.Spec.Template.Sidecars, v1.Sidecar{Name: name, Role: v1.Role{
			Command: []string{"/bin/sh", "-c", `echo $$$$ > "$UNITLET_DATA_DIR/` + name + `.pid"; exec sleep 1000`}}})
	}
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	got := waitServing(t, inst.Name, 1)
	if _, ok := got.Annotations["hosting.unitlet.dev/seeded"]; !ok {
		t.Errorf("no record of the seed on the Instance: %v", got.Annotations)
	}

	lay := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}
	li, err := lay.Instance("default", inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	pidFile := func(name string) string { return filepath.Join(li.DataDir(), name+".pid") }
	first := map[string]int{}
	for _, name := range sidecars {
		first[name] = readPid(t, pidFile(name))
		child, err := layout.SidecarCgroup(name)
		if err != nil {
			t.Fatal(err)
		}
		if cg, _ := os.ReadFile("/proc/" + strconv.Itoa(first[name]) + "/cgroup"); !strings.Contains(string(cg), "/"+child+"\n") {
			t.Errorf("sidecar %s (pid %d) is not in its own cgroup %s:\n%s", name, first[name], child, cg)
		}
	}
	if err := syscall.Kill(first["ticker"], syscall.SIGKILL); err != nil {
		t.Fatalf("kill sidecar ticker %d: %v", first["ticker"], err)
	}
	testutil.Eventually(t, "ticker started again", 60*time.Second, pollEvery, func() (bool, string) {
		b, _ := os.ReadFile(pidFile("ticker"))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid != 0 && pid != first["ticker"] && syscall.Kill(pid, 0) == nil, "pid " + string(b)
	})
	if pid := readPid(t, pidFile("tocker")); pid != first["tocker"] || syscall.Kill(pid, 0) != nil {
		t.Errorf("tocker was touched by ticker's death: pid %d, first %d, alive %v", pid, first["tocker"], syscall.Kill(pid, 0) == nil)
	}
	if c := meta.FindStatusCondition(getInstance(t, inst.Name).Status.Conditions, v1.ConditionReady); c == nil || c.Status != "True" {
		t.Errorf("Ready after the sidecar's restart: %+v", c)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testutil.Eventually(t, "pid file "+path, 30*time.Second, pollEvery, func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0, string(b)
	})
	return pid
}
