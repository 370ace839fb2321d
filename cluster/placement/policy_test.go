package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestOnlyPlacementBinds: with config/policy/placement_binding.yaml, a
// user with RBAC to update Instances pins one at creation, changes its
// other fields, but cannot move it (change spec.nodeName); the cluster
// side's service account can.
func TestOnlyPlacementBinds(t *testing.T) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-instance-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"instances"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
	create(t, role)
	create(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}})
	objs, err := testenv.DecodeFile("config/policy/placement_binding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		create(t, o)
	}
	clientAs := func(user string, groups ...string) client.Client {
		c, err := client.New(impersonating(user, groups...), client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice := clientAs("alice", "system:authenticated")
	cluster := clientAs(clusterSA, "system:serviceaccounts", "system:serviceaccounts:unitlet-system", "system:authenticated")
	// Nodes with no Enrollment: placement leaves the Instance where it is
	// (no node to move it to).
	inst := newInstance("alices", "vap-a", func(i *v1.Instance) { i.Spec.Placement = &v1.Placement{Moves: v1.MovesAllowed} })
	if err := alice.Create(ctx, inst); err != nil {
		t.Fatalf("alice pins an Instance at creation: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), inst) })
	setNode := func(c client.Client, node string, opts ...client.PatchOption) error {
		i := &v1.Instance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(inst), i); err != nil {
			return err
		}
		patch := client.MergeFrom(i.DeepCopy())
		i.Spec.NodeName = node
		return c.Patch(ctx, i, patch, opts...)
	}
	const want = "only the placement controller (unitlet-system:unitlet-nodewatch) binds or moves an Instance: alice may not change spec.nodeName from 'vap-a' to 'vap-b'"
	// Until the API server has loaded the policy a move is allowed: the
	// wait tries it dry, so that an early move cannot leave the Instance
	// on vap-b, where no later try could be refused.
	testutil.Eventually(t, "alice refused a move", waitLimit, pollEvery, func() (bool, string) {
		err := setNode(alice, "vap-b", client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), want), errString(err)
	})
	if err := setNode(alice, "vap-b"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("alice moves her Instance: %s, want refused: %s", errString(err), want)
	}
	i := &v1.Instance{}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(inst), i); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(i.DeepCopy())
	i.Spec.Suspend = true
	if err := alice.Patch(ctx, i, patch); err != nil {
		t.Errorf("alice suspends her Instance: %v", err)
	}
	if err := setNode(cluster, "vap-b"); err != nil {
		t.Errorf("the cluster side moves it: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

// TestOnlyAdministratorsRotateKeys: with config/policy/key_rotation.yaml
// (tested here beside the binding policy, with the same harness), a user
// who may update Instances changes their other annotations but not
// hosting.unitlet.dev/rotate-key; one granted `rotate` on instances/key
// does.
func TestOnlyAdministratorsRotateKeys(t *testing.T) {
	ctx := context.Background()
	editor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-key-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"instances"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
	rotator := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-key-rotator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"instances/key"},
			Verbs: []string{"rotate"}}}}
	for _, o := range []client.Object{editor, rotator,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-key-editor"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob"}, {Kind: rbacv1.UserKind, Name: "root-admin"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-key-rotator"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rotator.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "root-admin"}}},
	} {
		create(t, o)
	}
	objs, err := testenv.DecodeFile("config/policy/key_rotation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		create(t, o)
	}
	as := func(user string) client.Client {
		c, err := client.New(impersonating(user, "system:authenticated"), client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bob, admin := as("bob"), as("root-admin")
	inst := newInstance("bobs", "rot-a", nil)
	if err := bob.Create(ctx, inst); err != nil {
		t.Fatalf("bob creates an Instance: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), inst) })
	annotate := func(c client.Client, key, value string) error {
		i := &v1.Instance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(inst), i); err != nil {
			return err
		}
		patch := client.MergeFrom(i.DeepCopy())
		if i.Annotations == nil {
			i.Annotations = map[string]string{}
		}
		i.Annotations[key] = value
		return c.Patch(ctx, i, patch)
	}
	const want = "bob may not rotate the instance key of bobs: it takes verb rotate on instances/key"
	try := 0
	testutil.Eventually(t, "bob refused a rotation", waitLimit, pollEvery, func() (bool, string) {
		// Another value each time: one let through before the policy
		// took effect must not make the next try no change at all.
		try++
		err := annotate(bob, v1.AnnotationRotateKey, fmt.Sprint(try))
		return err != nil && strings.Contains(err.Error(), want), errString(err)
	})
	if err := annotate(bob, "team", "shop"); err != nil {
		t.Errorf("bob annotates his Instance otherwise: %v", err)
	}
	if err := annotate(admin, v1.AnnotationRotateKey, "admin"); err != nil {
		t.Errorf("an administrator rotates the key: %v", err)
	}
}
