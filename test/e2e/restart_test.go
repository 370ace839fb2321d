package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestAgentRestart: an agent killed outright leaves its units running; the
// next agent re-adopts what belongs to a known Generation (same process,
// still serving) and kills, and proves gone, what belongs to nothing.
func TestAgentRestart(t *testing.T) {
	a := startAgent(t, "e2e-restart")
	kept := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	kept.Name, kept.Spec.Host = "kept", "kept.example.com"
	// The kept app writes all the time and dies of SIGPIPE, as most
	// programs do, if its output breaks while the agent is away.
	kept.Spec.Template.Args[1] = "import signal, sys, threading, time\n" +
		"signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n" +
		"def tick():\n" +
		"    while True:\n" +
		"        print('tick', flush=True); time.sleep(0.05)\n" +
		"threading.Thread(target=tick, daemon=True).start()\n" +
		kept.Spec.Template.Args[1]
	orphan := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	orphan.Name, orphan.Spec.Host = "orphan", "orphan.example.com" // one host per Instance on a node
	for _, inst := range []*v1.Instance{kept, orphan} {
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deleteAndWait(t, "kept") })
	waitServing(t, "kept", 1)
	waitServing(t, "orphan", 1)
	pid := getGeneration(t, "kept", 1).Status.MainPID

	a.Stop(syscall.SIGKILL)
	time.Sleep(time.Second) // the kept app writes ~20 lines with no agent to read them
	// While no agent runs, the orphan's objects vanish without their finalizer:
	// what the node runs for them now belongs to nothing.
	forget(t, "orphan")
	orphanCgroup := layout.InstanceCgroup(a.CgroupRoot, "default", "orphan")
	if processesUnder(t, orphanCgroup) == 0 {
		t.Fatal("the orphan's processes died with the agent: nothing to adopt")
	}

	keptLog := keptLogFile(t, a)
	before := strings.Count(readFile(keptLog), "tick")
	if before == 0 {
		t.Fatalf("no output of the kept app in %s before the restart", keptLog)
	}

	a.Launch(t)
	testutil.Eventually(t, "the kept app's output collected again", 30*time.Second, pollEvery, func() (bool, string) {
		n := strings.Count(readFile(keptLog), "tick")
		return n > before, fmt.Sprintf("%d tick lines, %d before the restart", n, before)
	})
	testutil.Eventually(t, "orphan killed and proven gone", 60*time.Second, pollEvery, func() (bool, string) {
		return processesUnder(t, orphanCgroup) == 0, "processes remain"
	})
	inst := waitServing(t, "kept", 1)
	if got := getGeneration(t, "kept", 1).Status.MainPID; got != pid {
		t.Errorf("kept generation 1 runs as pid %d after the restart, was %d: restarted, not re-adopted", got, pid)
	}
	if body, err := unixGet(inst.Status.Socket, "/"); err != nil || body != "ledger ok\n" {
		t.Fatalf("GET after restart = %q, %v", body, err)
	}
}

// forget removes an Instance and its Generations from the API, finalizers
// and all, as if they had been lost.
func forget(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	var gens v1.GenerationList
	if err := k8s.List(ctx, &gens, client.InNamespace("default"), client.MatchingLabels{v1.LabelInstance: name}); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{getInstance(t, name)}
	for i := range gens.Items {
		objs = append(objs, &gens.Items[i])
	}
	for _, o := range objs {
		o.SetFinalizers(nil)
		if err := k8s.Update(ctx, o); err != nil {
			t.Fatalf("strip finalizers of %s: %v", o.GetName(), err)
		}
		if err := k8s.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

func keptLogFile(t *testing.T, a *agent) string {
	t.Helper()
	li, err := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}.Instance("default", "kept")
	if err != nil {
		t.Fatal(err)
	}
	return li.LogFile()
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
