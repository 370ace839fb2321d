package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// python is the interpreter the naive app runs on: the system's, which
// the app's own user can run (a user's shim under /root it cannot).
func python(t *testing.T) string {
	t.Helper()
	const p = "/usr/bin/python3"
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the naive app needs %s: %v", p, err)
	}
	return p
}

// TestNaiveAppSwapsWithoutLoss: an app that dies at SIGTERM, behind
// nginx, four clients in a loop, three Overlap swaps and ≥ 10,000
// requests: none fails, because each old generation is stopped only once
// the kernel shows its listener drained.
func TestNaiveAppSwapsWithoutLoss(t *testing.T) {
	a := startAgent(t, "e2e-drain")
	inst := testutil.NewInstance("naive", a.Node, testutil.NaiveApp(python(t)))
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	inst = waitServing(t, inst.Name, 1)
	addr := startNginx(t, inst.Status.Socket)
	kube.SwapsUnderLoad(t, inst.Name, addr, 4, 10000, 3)
}
