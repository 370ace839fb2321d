package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/escapeprobe/report"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// TestEscapeMatrix: on the direct backend, a tenant's app tries each way
// to reach another tenant or the node (the escape probe), beside another
// tenant that left traces; nothing it tries gets through. A run in the
// probing Instance joins its world: it sees its own app's processes and
// nobody else's. (The metadata row is proven in a network namespace of
// the test's own, runtime/netguard and runtime/trampoline; test/node
// proves it through systemd.)
func TestEscapeMatrix(t *testing.T) {
	a := startAgent(t, "e2e-escape")
	probe := testutil.EscapeProbe(t)
	marker := "unitlet-escape-" + runID
	for _, p := range []struct{ name, mode string }{{"escape-holder", "hold"}, {"escape-probe", "probe"}} {
		inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
		inst.Name, inst.Spec.Host = p.name, p.name+".example.com"
		testutil.EscapeApp(probe, p.mode, marker)(inst)
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	}
	waitServing(t, "escape-holder", 1)
	waitServing(t, "escape-probe", 1)

	li, err := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}.Instance("default", "escape-probe")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := report.Read(filepath.Join(li.DataDir(), "escape.json"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("escape matrix, direct backend:\n%s", report.Table(rows))
	for _, e := range report.Escapes(rows) {
		t.Error("escaped: " + e)
	}
	if len(rows) != report.Rows {
		t.Errorf("report has %d rows, want %d", len(rows), report.Rows)
	}

	// A run joins its Instance's world, as kubectl exec joins a pod's.
	var out string
	testutil.Eventually(t, "a run in escape-probe (once the agent's endpoint is published)", time.Minute, pollEvery, func() (bool, string) {
		run := testutil.Plugin(t, kubeconfig, "run", "escape-probe", "--", "/bin/sh", "-c",
			`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $f; echo; done`)
		out = run.Stdout()
		return run.Code() == 0, fmt.Sprintf("exit %d: %s", run.Code(), run.Stderr())
	})
	if !strings.Contains(out, probe+" probe") || strings.Contains(out, probe+" hold") {
		t.Errorf("a run should see its own app and nobody else's; it saw:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n > 8 {
		t.Errorf("a run saw %d processes, want only its Instance's: %s", n, out)
	}
}
