package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestServingAppCrashIsReplaced: the serving app is killed outright on the
// real node; a successor generation with the same template takes over,
// and the stable socket answers again.
func TestServingAppCrashIsReplaced(t *testing.T) {
	a := startAgent(t, "e2e-crash")
	inst := sample(t, "hosting_v1alpha1_instance_overlap.yaml", a.Node)
	inst.Name = "crashy"
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	waitServing(t, inst.Name, 1)
	g1 := getGeneration(t, inst.Name, 1)
	if g1.Status.MainPID == 0 {
		t.Fatalf("generation 1 reports no main pid: %+v", g1.Status)
	}
	if err := syscall.Kill(int(g1.Status.MainPID), syscall.SIGKILL); err != nil {
		t.Fatalf("kill generation 1's app %d: %v", g1.Status.MainPID, err)
	}
	got := waitServing(t, inst.Name, 2)
	if body, err := unixGet(got.Status.Socket, "/"); err != nil || body != "hello from shop.example.com generation 2\n" {
		t.Fatalf("GET through %s after the replacement = %q, %v", got.Status.Socket, body, err)
	}
	g1 = getGeneration(t, inst.Name, 1)
	if g1.Status.Exit == nil || g1.Status.Exit.Signal == "" {
		t.Errorf("generation 1's exit = %+v, want the signal that killed it", g1.Status.Exit)
	}
	if got := g1.Annotations["hosting.unitlet.dev/retired-because"]; !g1.Spec.Retired || got != v1.ReasonExited {
		t.Errorf("generation 1 retired %v because %q, want retired because %s", g1.Spec.Retired, got, v1.ReasonExited)
	}

	// No history kept: generation 1 goes, and so do its files on the node.
	lay := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}
	li, err := lay.Instance("default", inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	genDir, err := li.GenDir(1)
	if err != nil {
		t.Fatal(err)
	}
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.GenerationHistoryLimit = ptr.To[int32](0) })
	testutil.Eventually(t, "generation 1 pruned with its files", 30*time.Second, pollEvery, func() (bool, string) {
		_, statErr := os.Stat(genDir)
		getErr := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: inst.Name + "-g1"}, &v1.Generation{})
		return apierrors.IsNotFound(getErr) && os.IsNotExist(statErr), fmt.Sprintf("generation: %v; gen dir: %v", getErr, statErr)
	})
	if body, err := unixGet(got.Status.Socket, "/"); err != nil || body != "hello from shop.example.com generation 2\n" {
		t.Errorf("GET after the pruning = %q, %v", body, err)
	}
}
