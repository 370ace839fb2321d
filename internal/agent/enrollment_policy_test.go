package agent

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostingv1alpha1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// grantInstanceWrites lets the agent's service account write Instances
// whatever config/rbac says, so a refusal below can only be the policy's.
func grantInstanceWrites(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-agent-instance-writes"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hostingv1alpha1.GroupVersion.Group},
			Resources: []string{"instances", "instances/status"}, Verbs: []string{"get", "update", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "unitlet-agent", Namespace: "unitlet-system"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

const (
	wantOtherNode = "may write only its own node's objects"
	wantNoClaim   = "without the authentication.kubernetes.io/node-name claim are refused"
)

// TestAgentWritesOnlyItsOwnNode: node A's agent writes A's Instance and
// Enrollment; B's are refused with the policy's message, and so is every
// write of an agent token without the node-name claim.
func TestAgentWritesOnlyItsOwnNode(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	grantInstanceWrites(t)
	instA, instB := instanceOn("policy-node-a", "policy-a"), instanceOn("policy-node-b", "policy-b")
	createInstance(t, instA)
	createInstance(t, instB)
	agentA, agentNoClaim := agentClient(t, "policy-node-a"), agentClient(t, "")

	annotate := func(c client.Client, inst *hostingv1alpha1.Instance) error {
		var cur hostingv1alpha1.Instance
		if err := c.Get(ctx, client.ObjectKeyFromObject(inst), &cur); err != nil {
			return err
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Annotations = map[string]string{"test.unitlet.dev/touched": "yes"}
		return c.Patch(ctx, &cur, patch)
	}
	refused := func(err error, want string) error {
		if err == nil || !strings.Contains(err.Error(), want) {
			return errorf("want refused with %q, got %v", want, err)
		}
		return nil
	}
	// The policy takes effect once the API server has loaded it.
	eventually(t, "node A's agent refused on node B's Instance", func() error {
		return refused(annotate(agentA, instB), wantOtherNode+": this Instance belongs to node policy-node-b")
	})
	if err := annotate(agentA, instA); err != nil {
		t.Errorf("node A's agent on its own Instance: %v", err)
	}
	if err := refused(annotate(agentNoClaim, instA), wantNoClaim); err != nil {
		t.Errorf("agent token without the claim: %v", err)
	}

	for _, enr := range []string{"policy-node-a", "policy-node-b"} {
		t.Cleanup(func() { deleteForce(t, &hostingv1alpha1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: enr}}) })
	}
	if err := agentA.Create(ctx, &hostingv1alpha1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-a"}}); err != nil {
		t.Errorf("node A's agent creating its own Enrollment: %v", err)
	}
	err := agentA.Create(ctx, &hostingv1alpha1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-b"}})
	if err := refused(err, wantOtherNode+": this Enrollment belongs to node policy-node-b"); err != nil {
		t.Errorf("node A's agent creating node B's Enrollment: %v", err)
	}
	// An administrator made B's Enrollment; A's agent cannot write its status.
	enrB := &hostingv1alpha1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-b"}}
	if err := env.Client.Create(ctx, enrB); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(enrB.DeepCopy())
	enrB.Status.Mode = hostingv1alpha1.ModeHosting
	if err := refused(agentA.Status().Patch(ctx, enrB, patch), wantOtherNode); err != nil {
		t.Errorf("node A's agent writing node B's Enrollment status: %v", err)
	}
}
