package agent

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/join"
)

// TestLeaseThatCannotBeWritten: an agent whose node Lease cannot be
// written (here its namespace is one the agent has no rights in) still
// publishes its Enrollment, so an administrator sees the node and why
// it cannot host: NodeLease False/LeaseNotRenewed with the API error, on
// the Enrollment and on /hostingz. Approved, it still hosts nothing.
func TestLeaseThatCannotBeWritten(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	if err := os.Chmod(opts.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	opts.LeaseNamespace = "no-lease-here"
	const node = "leaseless-node"
	a := startAgent(t, node, opts)
	stage := join.StageLeaseNotHeld
	enr := a.expectStage(t, http.StatusServiceUnavailable, stage)
	if got := condStatus(enr, v1.ConditionNodeLease); !strings.HasPrefix(got, "False/"+v1.ReasonLeaseNotRenewed+":") || !strings.Contains(got, "no-lease-here") {
		t.Errorf("NodeLease = %s, want False/LeaseNotRenewed naming the namespace", got)
	}
	if _, body, err := a.get("/hostingz"); err != nil || !strings.Contains(body, "no-lease-here") {
		t.Errorf("/hostingz = %q, %v; want the Lease's error", body, err)
	}

	// Approved, the node still hosts nothing: a node whose Lease nobody
	// renews would be marked lost by nodewatch anyway.
	setApproved(t, node, true)
	time.Sleep(5 * a.probeEvery())
	a.expectStage(t, http.StatusServiceUnavailable, stage)
	if calls, accepting, _ := a.probe.state(); calls != 0 || accepting {
		t.Errorf("approved without a Lease: %d setups, accepting %v", calls, accepting)
	}
}
