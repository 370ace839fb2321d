package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

const pinPolicy = "config/policy/enrollment_endpoint_pin.yaml"

// tokenFor is a real token of service account ns/sa from the API server's
// TokenRequest, bound to pod when it is not nil (the API server then puts
// the pod's node in the user's extra, as for a DaemonSet's projected
// token), and the user the API server sees for it (SelfSubjectReview).
func tokenFor(t *testing.T, kc kubernetes.Interface, ns, sa string, pod *corev1.Pod) (*rest.Config, authenticationv1.UserInfo) {
	t.Helper()
	ctx := testCtx(t)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, sa, err)
	}
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	who, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().
		Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who is the token of %s/%s: %v", ns, sa, err)
	}
	return cfg, who.Status.UserInfo
}

// pinFixture makes nodes A and B, their Enrollments, service accounts
// (the agent's, and a helper's with RBAC on enrollments/status), and a
// pod of each on node A.
func pinFixture(t *testing.T, kc kubernetes.Interface) (agentPod, helperPod *corev1.Pod) {
	t.Helper()
	ctx := testCtx(t)
	install(t, "config/rbac/service_account.yaml")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-enrollment-status-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group},
			Resources: []string{"enrollments", "enrollments/status"}, Verbs: []string{"get", "patch", "update"}}}}
	objs := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pin-node-a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pin-node-b"}},
		&v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "pin-node-a"}},
		&v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "pin-node-b"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-helper"}},
		role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "node-helper"}}},
	}
	pod := func(ns, name, sa string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{NodeName: "pin-node-a", ServiceAccountName: sa,
				Containers: []corev1.Container{{Name: "c", Image: "unitlet"}}}}
	}
	agentPod, helperPod = pod("unitlet-system", "agent-on-a", "unitlet-agent"), pod("default", "helper-on-a", "node-helper")
	for _, o := range append(objs, agentPod, helperPod) {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() {
			if _, ok := o.(*corev1.Pod); ok {
				// No kubelet confirms a graceful deletion here.
				_ = env.Client.Delete(context.Background(), o, client.GracePeriodSeconds(0))
				return
			}
			deleteForce(t, o)
		})
	}
	return agentPod, helperPod
}

// TestEndpointPin: a token bound to a pod on node A names node A (the API
// server's node-name extra). Before the pin, any such token with RBAC on
// enrollments/status (here a helper's, which unitlet-agent-node-scoped
// does not match) rewrites node B's endpoint; with it, only A's. The
// agent's token bound to a pod on A writes A's and is refused on B; an
// agent token bound to no pod is refused everywhere.
func TestEndpointPin(t *testing.T) {
	ctx := testCtx(t)
	installAgentCredentials(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	agentPod, helperPod := pinFixture(t, kc)

	agentCfg, agentWho := tokenFor(t, kc, "unitlet-system", "unitlet-agent", agentPod)
	helperCfg, helperWho := tokenFor(t, kc, "default", "node-helper", helperPod)
	unboundCfg, unboundWho := tokenFor(t, kc, "unitlet-system", "unitlet-agent", nil)
	for name, who := range map[string]authenticationv1.UserInfo{"agent": agentWho, "helper": helperWho} {
		if got := who.Extra[nodeClaim]; len(got) != 1 || got[0] != "pin-node-a" {
			t.Fatalf("the %s's pod-bound token: extra %s = %v, want [pin-node-a] (user %+v)", name, nodeClaim, got, who)
		}
	}
	if _, ok := unboundWho.Extra[nodeClaim]; ok {
		t.Fatalf("a token bound to no pod names a node: %+v", unboundWho)
	}
	clientOf := func(cfg *rest.Config) client.Client {
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent, helper, unbound := clientOf(agentCfg), clientOf(helperCfg), clientOf(unboundCfg)
	setEndpoint := func(c client.Client, node, addr string) error {
		var enr v1.Enrollment
		if err := c.Get(ctx, client.ObjectKey{Name: node}, &enr); err != nil {
			return err
		}
		patch := client.MergeFrom(enr.DeepCopy())
		enr.Status.Endpoint = &v1.AgentEndpoint{Address: addr, ServerName: node + ".agent.unitlet.dev", CABundle: []byte("ca")}
		return c.Status().Patch(ctx, &enr, patch)
	}
	// Today (without the pin): node A's helper rewrites node B's endpoint.
	testutil.Eventually(t, "without the pin, a node-A token writes node B's endpoint", waitLimit, pollEvery,
		testutil.Succeeds(func() error { return setEndpoint(helper, "pin-node-b", "198.51.100.66:10260") }))

	install(t, pinPolicy)
	t.Cleanup(func() {
		// Gone from the API server's policies too, before the next test.
		uninstall(t, pinPolicy)
		testutil.Eventually(t, "the pin unloaded", waitLimit, pollEvery,
			testutil.Succeeds(func() error { return setEndpoint(helper, "pin-node-b", "198.51.100.66:10260") }))
	})
	refused := func(err error, wants ...string) error {
		for _, w := range wants {
			if err != nil && strings.Contains(err.Error(), w) {
				return nil
			}
		}
		return errorf("want refused with one of %q, got %v", wants, err)
	}
	const wantPin = "a token bound to node pin-node-a may write only Enrollment pin-node-a's status, not pin-node-b"
	testutil.Eventually(t, "with the pin, node A's helper is refused on node B", waitLimit, pollEvery,
		testutil.Succeeds(func() error { return refused(setEndpoint(helper, "pin-node-b", "198.51.100.66:10260"), wantPin) }))
	if err := setEndpoint(helper, "pin-node-a", "192.0.2.1:10260"); err != nil {
		t.Errorf("node A's helper on node A's Enrollment: %v", err)
	}
	if err := setEndpoint(agent, "pin-node-a", "192.0.2.1:10260"); err != nil {
		t.Errorf("node A's agent publishing its own endpoint: %v", err)
	}
	if err := refused(setEndpoint(agent, "pin-node-b", "192.0.2.1:10260"), wantPin, wantOtherNode); err != nil {
		t.Errorf("node A's agent on node B's Enrollment: %v", err)
	}
	const wantUnbound = "unitlet-agent writes an Enrollment's status only with its pod-bound token"
	if err := refused(setEndpoint(unbound, "pin-node-a", "192.0.2.1:10260"), wantUnbound, wantNoClaim); err != nil {
		t.Errorf("an agent token bound to no pod: %v", err)
	}
	// An administrator (no node claim) still writes any.
	if err := setEndpoint(env.Client, "pin-node-b", "192.0.2.2:10260"); err != nil {
		t.Errorf("an administrator on node B's Enrollment: %v", err)
	}
}

// uninstall deletes the objects of the YAML files install created, so a
// repeated run (-count) starts without them again.
func uninstall(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("%s: %v", f, err)
				}
				break
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := env.Client.Delete(context.Background(), &u); err != nil && !isNotFound(err) {
				t.Errorf("uninstall %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}
