package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// grantInstanceWrites lets the agent's service account write Instances
// and Enrollments whatever config/rbac says, so a refusal below can only
// be the policy's.
func grantInstanceWrites(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-agent-instance-writes"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group},
			Resources: []string{"instances", "instances/status", "enrollments"}, Verbs: []string{"get", "update", "patch"}}},
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

	annotate := func(c client.Client, inst *v1.Instance) error {
		var cur v1.Instance
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
	testutil.Eventually(t, "node A's agent refused on node B's Instance", waitLimit, pollEvery, testutil.Succeeds(func() error {
		return refused(annotate(agentA, instB), wantOtherNode+": this Instance belongs to node policy-node-b")
	}))
	if err := annotate(agentA, instA); err != nil {
		t.Errorf("node A's agent on its own Instance: %v", err)
	}
	if err := refused(annotate(agentNoClaim, instA), wantNoClaim); err != nil {
		t.Errorf("agent token without the claim: %v", err)
	}

	for _, enr := range []string{"policy-node-a", "policy-node-b"} {
		t.Cleanup(func() { deleteForce(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: enr}}) })
	}
	if err := agentA.Create(ctx, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-a"}}); err != nil {
		t.Errorf("node A's agent creating its own Enrollment: %v", err)
	}
	err := agentA.Create(ctx, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-b"}})
	if err := refused(err, wantOtherNode+": this Enrollment belongs to node policy-node-b"); err != nil {
		t.Errorf("node A's agent creating node B's Enrollment: %v", err)
	}
	// An administrator made B's Enrollment; A's agent cannot write its status.
	enrB := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "policy-node-b"}}
	if err := env.Client.Create(ctx, enrB); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(enrB.DeepCopy())
	enrB.Status.Mode = v1.ModeHosting
	if err := refused(agentA.Status().Patch(ctx, enrB, patch), wantOtherNode); err != nil {
		t.Errorf("node A's agent writing node B's Enrollment status: %v", err)
	}
}

// TestAgentCannotApproveOrEditSpecs: like NodeRestriction, an agent's
// token cannot approve its own node (at creation or later) nor change an
// Instance's spec, even with RBAC that would allow it, nor grant a user
// (its role reads UserGrants only); its finalizer and status writes
// still go through.
func TestAgentCannotApproveOrEditSpecs(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	grantInstanceWrites(t)
	const node = "policy-node-c"
	inst := instanceOn(node, "policy-c")
	createInstance(t, inst)
	agent := agentClient(t, node)
	refused := func(err error, want string) error {
		if err == nil || !strings.Contains(err.Error(), want) {
			return errorf("want refused with %q, got %v", want, err)
		}
		return nil
	}
	const wantApproval = "may not set or change an Enrollment's spec"
	t.Cleanup(func() { deleteForce(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	// Dry, while the API server loads the policy: a create let through
	// before would leave the Enrollment made, and the creates below
	// would find it there.
	testutil.Eventually(t, "an agent creating its Enrollment approved is refused", waitLimit, pollEvery, testutil.Succeeds(func() error {
		enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: v1.EnrollmentSpec{Approved: true}}
		return refused(agent.Create(ctx, enr, client.DryRunAll), wantApproval)
	}))
	approved := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: v1.EnrollmentSpec{Approved: true}}
	if err := refused(agent.Create(ctx, approved), wantApproval); err != nil {
		t.Errorf("the agent creating its Enrollment approved: %v", err)
	}
	grant := &v1.UserGrant{ObjectMeta: metav1.ObjectMeta{Name: "policy-root"},
		Spec: v1.UserGrantSpec{User: "root", Namespaces: []string{"default"}, Nodes: []string{node}}}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), grant) })
	if err := agent.Create(ctx, grant); !apierrors.IsForbidden(err) {
		t.Errorf("the agent granting root to a namespace on its node: err = %v, want Forbidden", err)
	}
	enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := agent.Create(ctx, enr); err != nil {
		t.Fatalf("the agent creating its Enrollment unapproved: %v", err)
	}
	patch := client.MergeFrom(enr.DeepCopy())
	enr.Spec.Approved = true
	if err := refused(agent.Patch(ctx, enr, patch), wantApproval); err != nil {
		t.Errorf("the agent approving itself: %v", err)
	}
	// Approved by an administrator: the agent cannot take it back either,
	// yet writes its status.
	var cur v1.Enrollment
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Approved = true
	if err := env.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Spec.Approved = false
	if err := refused(agent.Patch(ctx, &cur, patch), wantApproval); err != nil {
		t.Errorf("the agent withdrawing its approval: %v", err)
	}
	if err := agent.Get(ctx, client.ObjectKey{Name: node}, &cur); err != nil {
		t.Fatal(err)
	}
	// Approved by the policy and withdrawn: the agent cannot erase the
	// policy's mark, which would have the policy approve it again.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations = map[string]string{v1.AnnotationApprovedByPolicy: "pool=web"}
	cur.Spec.Approved = false
	if err := env.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(cur.DeepCopy())
	delete(cur.Annotations, v1.AnnotationApprovedByPolicy)
	if err := refused(agent.Patch(ctx, &cur, patch), "approved-by-policy"); err != nil {
		t.Errorf("the agent erasing the approval policy's mark: %v", err)
	}
	if err := agent.Get(ctx, client.ObjectKey{Name: node}, &cur); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Status.Mode = v1.ModeJoining
	if err := agent.Status().Patch(ctx, &cur, patch); err != nil {
		t.Errorf("the agent writing its Enrollment's status: %v", err)
	}

	var got v1.Instance
	if err := agent.Get(ctx, client.ObjectKeyFromObject(inst), &got); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = true
	if err := refused(agent.Patch(ctx, &got, patch), "may not change an Instance's spec"); err != nil {
		t.Errorf("the agent editing its Instance's spec: %v", err)
	}
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = false
	got.Finalizers = append(got.Finalizers, "test.unitlet.dev/kept")
	if err := agent.Patch(ctx, &got, patch); err != nil {
		t.Errorf("the agent adding a finalizer: %v", err)
	}
	patch = client.MergeFrom(got.DeepCopy())
	got.Finalizers = nil
	if err := agent.Patch(ctx, &got, patch); err != nil {
		t.Errorf("the agent removing the finalizer: %v", err)
	}
}

// TestAgentReadsSecretsOnlyWhereOptedIn: with the shipped roles, an
// agent's token reads Secrets and ConfigMaps only in a namespace where an
// administrator bound the env reader role.
func TestAgentReadsSecretsOnlyWhereOptedIn(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	install(t, "config/rbac/env_reader_role.yaml")
	const optedIn = "env-opted-in"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedIn}}
	if err := env.Client.Create(ctx, ns); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "unitlet-agent-env", Namespace: optedIn},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "unitlet-agent-env-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "unitlet-agent", Namespace: "unitlet-system"}},
	}
	for _, o := range []client.Object{
		binding,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-env", Namespace: optedIn}, StringData: map[string]string{"K": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-env", Namespace: "default"}, StringData: map[string]string{"K": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-env", Namespace: "default"}, Data: map[string]string{"K": "v"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	agent := agentClient(t, "policy-node-d")
	testutil.Eventually(t, "the agent reads a Secret where opted in", waitLimit, pollEvery, testutil.Succeeds(func() error {
		return agent.Get(ctx, client.ObjectKey{Namespace: optedIn, Name: "app-env"}, &corev1.Secret{})
	}))
	for _, o := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := agent.Get(ctx, client.ObjectKey{Namespace: "default", Name: "app-env"}, o); !apierrors.IsForbidden(err) {
			t.Errorf("the agent reading a %T outside the opted-in namespaces: %v, want Forbidden", o, err)
		}
	}
}

// TestAgentRenewsOnlyItsOwnLease: an agent's token creates and renews its
// own node's Lease and no other node's.
func TestAgentRenewsOnlyItsOwnLease(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	agent := agentClient(t, "lease-node-a")
	lease := func(node string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "unitlet-system", Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(40)),
				RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	}
	for _, n := range []string{"lease-node-a", "lease-node-b"} {
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), lease(n)) })
	}
	testutil.Eventually(t, "the agent creating its own node's Lease", waitLimit, pollEvery, testutil.Succeeds(func() error {
		return agent.Create(ctx, lease("lease-node-a"))
	}))
	own := &coordinationv1.Lease{}
	if err := agent.Get(ctx, client.ObjectKey{Namespace: "unitlet-system", Name: "lease-node-a"}, own); err != nil {
		t.Fatal(err)
	}
	own.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := agent.Update(ctx, own); err != nil {
		t.Errorf("the agent renewing its own Lease: %v", err)
	}
	if err := agent.Create(ctx, lease("lease-node-b")); err == nil || !strings.Contains(err.Error(), "only its own node's Lease") {
		t.Errorf("the agent creating another node's Lease: %v, want refused", err)
	}
	if err := env.Client.Create(ctx, lease("lease-node-b")); err != nil {
		t.Fatal(err)
	}
	other := &coordinationv1.Lease{}
	if err := agent.Get(ctx, client.ObjectKey{Namespace: "unitlet-system", Name: "lease-node-b"}, other); err != nil {
		t.Fatal(err)
	}
	other.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := agent.Update(ctx, other); err == nil || !strings.Contains(err.Error(), "only its own node's Lease") {
		t.Errorf("the agent renewing another node's Lease: %v, want refused", err)
	}
}

// TestAgentClaimsHostsOnlyForItsNode: node A's agent creates and deletes
// HostClaims that name node A; it can neither claim a host for node B nor
// release a claim held on node B, even with the agent's own role.
func TestAgentClaimsHostsOnlyForItsNode(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	agentA := agentClient(t, "policy-node-a")
	claim := func(host, node string) *v1.HostClaim {
		return &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: host},
			Spec: v1.HostClaimSpec{Namespace: "default", Name: "policy-claim", UID: "u-policy-claim", NodeName: node}}
	}
	refused := func(err error, want string) error {
		if err == nil || !strings.Contains(err.Error(), want) {
			return errorf("want refused with %q, got %v", want, err)
		}
		return nil
	}
	onB := claim("claim-b.example.com", "policy-node-b")
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), onB) })
	// Dry, as above: an early create let through would make onB.
	testutil.Eventually(t, "node A's agent claiming for node B is refused", waitLimit, pollEvery, testutil.Succeeds(func() error {
		return refused(agentA.Create(ctx, onB.DeepCopy(), client.DryRunAll), wantOtherNode+": this HostClaim belongs to node policy-node-b")
	}))
	if err := refused(agentA.Create(ctx, onB.DeepCopy()), wantOtherNode+": this HostClaim belongs to node policy-node-b"); err != nil {
		t.Errorf("node A's agent claiming for node B: %v", err)
	}
	if err := env.Client.Create(ctx, onB); err != nil {
		t.Fatal(err)
	}
	if err := refused(agentA.Delete(ctx, onB), wantOtherNode+": this HostClaim belongs to node policy-node-b"); err != nil {
		t.Errorf("node A's agent releasing node B's claim: %v", err)
	}
	onA := claim("claim-a.example.com", "policy-node-a")
	if err := agentA.Create(ctx, onA); err != nil {
		t.Fatalf("node A's agent claiming for its node: %v", err)
	}
	if err := agentA.Delete(ctx, onA, client.Preconditions{UID: &onA.UID}); err != nil {
		t.Errorf("node A's agent releasing its node's claim: %v", err)
	}
}
