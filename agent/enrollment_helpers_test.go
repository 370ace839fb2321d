package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// The agent's identity as the API server sees a pod-bound token of it.
const (
	agentUser = "system:serviceaccount:unitlet-system:unitlet-agent"
	nodeClaim = "authentication.kubernetes.io/node-name"
)

var agentGroups = []string{"system:serviceaccounts", "system:serviceaccounts:unitlet-system", "system:authenticated"}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// agentConfig is env's admin config impersonating the agent's service
// account, with the node-name claim when node is not empty.
func agentConfig(node string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agentUser, Groups: agentGroups}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeClaim: {node}}
	}
	return cfg
}

func agentClient(t *testing.T, node string) client.Client {
	t.Helper()
	c, err := client.New(agentConfig(node), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agentKubeconfig writes a kubeconfig that acts as the agent of node, for
// the agent's own --kubeconfig flag.
func agentKubeconfig(t *testing.T, node string) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: agentUser, ImpersonateGroups: agentGroups,
		ImpersonateUserExtra: map[string][]string{nodeClaim: {node}},
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "agent"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// install creates the objects of the YAML files (config/...) as admin,
// once per test binary: they are cluster-wide, like a real install.
func install(t *testing.T, files ...string) {
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
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			err := env.Client.Create(context.Background(), &u)
			if err != nil && !isAlreadyExists(err) {
				t.Fatalf("install %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// installAgentCredentials binds the agent's roles (config/rbac, in its
// namespace) and installs the node-scoping policies (config/policy).
func installAgentCredentials(t *testing.T) {
	install(t, "config/default/namespace.yaml", "config/rbac/role.yaml", "config/rbac/role_binding.yaml",
		"config/rbac/lease_role_binding.yaml", "config/policy/node_scoped_agent.yaml", "config/policy/agent_own_lease.yaml")
}

func instanceOn(node, name string) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.InstanceSpec{
			Host:     name + ".example.com",
			NodeName: node,
			Template: v1.Template{
				Command: []string{"/bin/sleep"},
				Args:    []string{"600"},
				Tier: v1.Tier{
					Memory: resource.MustParse("256Mi"),
					CPU:    resource.MustParse("500m"),
					Pids:   512,
				},
			},
		},
	}
}

func createInstance(t *testing.T, inst *v1.Instance) {
	t.Helper()
	if err := env.Client.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteForce(t, inst) })
}

// deleteForce removes obj even if something put a finalizer on it.
func deleteForce(t *testing.T, obj client.Object) {
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return
	}
	if len(obj.GetFinalizers()) > 0 {
		obj.SetFinalizers(nil)
		_ = env.Client.Update(ctx, obj)
	}
	if err := env.Client.Delete(ctx, obj); err != nil && !isNotFound(err) {
		t.Errorf("delete %s: %v", obj.GetName(), err)
	}
}

// How long a wait of the enrollment tests may take, and how often it
// looks again.
const (
	waitLimit = 30 * time.Second
	pollEvery = 50 * time.Millisecond
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
func isNotFound(err error) bool      { return apierrors.IsNotFound(err) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
