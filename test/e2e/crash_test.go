package e2e

import (
	"context"
	"syscall"
	"testing"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// TestServingAppCrashIsReplaced: the serving app is killed outright on the
// real node; a successor generation with the same template takes over,
// and the stable socket answers again.
func TestServingAppCrashIsReplaced(t *testing.T) {
	a := startAgent(t, "e2e-crash")
	inst := sample(t, "hosting_v1alpha1_instance_overlap.yaml", a.node)
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
}
