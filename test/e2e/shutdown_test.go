package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/cgrouphold"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestSIGTERMDuringKillProof: the agent gets SIGTERM while it retires
// the generation of a deleted Instance, one of whose processes cannot die
// (frozen in a freezer cgroup of the test's own). The agent cuts the proof
// short within its shutdown budget, and what that proof says reaches the
// API before the agent exits: the Generation reads Terminated=False (its
// kill unproven), and both finalizers stay. Once the process can die, the
// next agent finishes the deletion.
func TestSIGTERMDuringKillProof(t *testing.T) {
	// Its run root outside /dev/shm: the trampoline gives each app a
	// /dev/shm of its own, which hides agentproc's default run root there.
	a := startAgent(t, "e2e-sigterm", func(a *agent) { a.RunRoot = "/run/ul-sigterm-" + runID })
	inst := sample(t, "hosting_v1alpha1_instance_overlap.yaml", a.Node)
	inst.Name = "held"
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	waitServing(t, inst.Name, 1)
	app := int(getGeneration(t, inst.Name, 1).Status.MainPID)
	child, err := layout.GenerationCgroup(1)
	if err != nil {
		t.Fatal(err)
	}
	hold := cgrouphold.In(t, filepath.Join(layout.InstanceCgroup(a.CgroupRoot, "default", inst.Name), child), runID+"-sigterm")

	if err := k8s.Delete(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	// The app is gone at the stop's SIGTERM; the held process keeps the
	// generation's cgroup populated: the retire is under way.
	testutil.Eventually(t, "generation 1's app stopped", 30*time.Second, pollEvery, func() (bool, string) {
		return exited(app), "app pid " + strconv.Itoa(app) + " still runs"
	})
	time.Sleep(time.Second)
	if g := getGeneration(t, inst.Name, 1); meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated) != nil {
		t.Fatalf("generation 1 has a kill outcome before the agent's SIGTERM: %s", conditions(g.Status.Conditions))
	}

	sent := time.Now()
	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the agent exits after SIGTERM", 40*time.Second, pollEvery, func() (bool, string) {
		return !a.Running(), "still running"
	})
	if took := time.Since(sent); took > 25*time.Second {
		t.Errorf("the agent took %s to exit after SIGTERM, want within 25s", took)
	}

	g := getGeneration(t, inst.Name, 1)
	t.Logf("agent exited %s after SIGTERM; generation 1: %s", time.Since(sent).Round(time.Second), conditions(g.Status.Conditions))
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated)
	if c == nil || c.Status != "False" || (c.Reason != "Cancelled" && c.Reason != v1.ReasonProofTimedOut) {
		t.Errorf("generation 1 after the agent's SIGTERM: %s; want Terminated=False (Cancelled or ProofTimedOut)", conditions(g.Status.Conditions))
	}
	if !slices.Contains(g.Finalizers, v1.Finalizer) {
		t.Errorf("generation 1 let go of its finalizer with its kill unproven: finalizers %v", g.Finalizers)
	}
	if f := getInstance(t, inst.Name).Finalizers; !slices.Contains(f, v1.Finalizer) {
		t.Errorf("the Instance let go of its finalizer with a kill unproven: finalizers %v", f)
	}

	hold.Release(t)
	a.Launch(t)
	deleteAndWait(t, inst.Name)
}

// exited: pid is gone or a zombie.
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] == "Z"
}
