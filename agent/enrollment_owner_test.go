package agent

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/enrollment"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/join"
)

// createNode registers a Node object named name (as its kubelet would)
// and returns it with its uid.
func createNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return n
}

// expectOwners waits until node's Enrollment holds exactly want.
func expectOwners(t *testing.T, node string, want []metav1.OwnerReference) {
	t.Helper()
	testutil.Eventually(t, "the Enrollment's owners", waitLimit, pollEvery, testutil.Succeeds(func() error {
		var enr v1.Enrollment
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
			return err
		}
		if diff := cmp.Diff(want, enr.OwnerReferences); diff != "" {
			return errorf("owners (-want,+got):\n%s", diff)
		}
		return nil
	}))
}

// TestEnrollmentCreatedOwnedByItsNode: with its Node registered, the
// Enrollment the agent creates (with the agent's credentials: RBAC and
// the node-scoping policy) is owned by the Node from its creation.
func TestEnrollmentCreatedOwnedByItsNode(t *testing.T) {
	installAgentCredentials(t)
	const node = "owned-at-create"
	n := createNode(t, node)
	t.Cleanup(func() { deleteForce(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	enr, err := enrollment.Ensure(testCtx(t), agentClient(t, node), node)
	if err != nil {
		t.Fatal(err)
	}
	want := []metav1.OwnerReference{enrollment.NodeOwner(node, n.UID)}
	if diff := cmp.Diff(want, enr.OwnerReferences); diff != "" {
		t.Errorf("owners of the created Enrollment (-want,+got):\n%s", diff)
	}
}

// TestEnrollmentOwnerAddedAndMended: an Enrollment made before its Node
// (no owner) gets the Node as owner once the Node is registered, and the
// new Node's when the Node is registered anew (a new uid), by the running
// agent with its own credentials.
func TestEnrollmentOwnerAddedAndMended(t *testing.T) {
	needRoot(t)
	const node = "owner-mend-node"
	a := startAgent(t, node, flowRoots(t))
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	expectOwners(t, node, nil)

	first := createNode(t, node)
	expectOwners(t, node, []metav1.OwnerReference{enrollment.NodeOwner(node, first.UID)})

	// envtest runs no garbage collector: the Enrollment outlives the
	// deleted Node, holding its uid, as it would until the collector
	// came round.
	if err := env.Client.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	second := createNode(t, node)
	if second.UID == first.UID {
		t.Fatalf("the re-registered Node kept uid %s", first.UID)
	}
	expectOwners(t, node, []metav1.OwnerReference{enrollment.NodeOwner(node, second.UID)})
	if err := a.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
