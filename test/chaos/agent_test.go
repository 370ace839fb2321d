package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// startNodeAgent runs an agent as the DaemonSet does (enrollment
// required, the node Lease renewed), approves its Enrollment as an
// administrator would, and waits until it hosts. When the test ends the
// agent stops and its roots are swept. tune adjusts it before the start.
func startNodeAgent(t *testing.T, node string, tune ...func(*agentproc.Agent)) *agentproc.Agent {
	t.Helper()
	a := newNodeAgent(t, node, runID, tune...)
	a.Start(t)
	approve(t, node)
	a.WaitReady(t, 60*time.Second)
	return a
}

// newNodeAgent is an agent for node with the DaemonSet's choices, not yet
// started; when the test ends it stops, its log is kept if the test
// failed, and its roots are swept.
func newNodeAgent(t *testing.T, node, tag string, tune ...func(*agentproc.Agent)) *agentproc.Agent {
	a := agentproc.New(t, node, tag, agentConfig)
	a.Args = nodeAgentArgs()
	for _, f := range tune {
		f(a)
	}
	t.Cleanup(func() {
		a.Stop(syscall.SIGTERM)
		if t.Failed() {
			keepLog(t, a)
		}
		a.Sweep(t)
	})
	return a
}

// nodeAgentArgs are the DaemonSet's choices the chaos agents share.
func nodeAgentArgs() []string {
	return []string{"--require-enrollment=true", "--socket-group", "www-data", "--lease-namespace", leaseNS}
}

// approve sets spec.approved on node's Enrollment once the agent made it.
func approve(t *testing.T, node string) {
	t.Helper()
	testutil.Eventually(t, "Enrollment "+node+" approved", 60*time.Second, pollEvery, func() (bool, string) {
		var enr v1.Enrollment
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
			return false, err.Error()
		}
		if enr.Spec.Approved {
			return true, ""
		}
		patch := client.MergeFrom(enr.DeepCopy())
		enr.Spec.Approved = true
		err := k8s.Patch(context.Background(), &enr, patch)
		return err == nil, ""
	})
}

// crash kills a with SIGKILL and starts it again after pause.
func crash(t *testing.T, a *agentproc.Agent, pause time.Duration) {
	t.Helper()
	a.Stop(syscall.SIGKILL)
	tally.fault("agent SIGKILL")
	time.Sleep(pause)
	a.Start(t)
	a.WaitReady(t, 60*time.Second)
}

// deleteAll deletes every Instance of m and waits until each is gone.
func deleteAll(t *testing.T, m *model) {
	t.Helper()
	for _, name := range m.names() {
		d, _ := m.get(name)
		d.deleted = true
		if err := m.apply(context.Background(), name, d); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	m.waitSettled(t)
}

// keepLog copies a failed test's agent log out of its temp dir, which the
// test's end removes, and says where.
func keepLog(t *testing.T, a *agentproc.Agent) {
	b, err := os.ReadFile(a.LogPath)
	if err != nil {
		t.Logf("agent %s log: %v", a.Node, err)
		return
	}
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("unitlet-chaos-%s-%s.log", runID, filepath.Base(filepath.Dir(a.RunRoot+"/x"))))
	if err := os.WriteFile(kept, b, 0o644); err != nil {
		t.Logf("keep agent %s log: %v", a.Node, err)
		return
	}
	t.Logf("agent %s log kept in %s; its tail:\n%s", a.Node, kept, a.LogTail(30))
}
