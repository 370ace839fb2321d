package relay_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/frontproxy"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/cluster/relay"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/relaytrust"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

const (
	relayNS = "unitlet-system"
	appNS   = "shop"
	node    = "vm1"
)

// harness is a real kube-apiserver with the front-proxy flags, the relay
// registered behind it, a test agent for node vm1 and two users: viewer
// (get instances/log) and runner (get+create instances/run, /exec).
type harness struct {
	admin          client.Client
	adminCfg       *rest.Config
	viewer, runner *rest.Config
	relayAddr      string
	fp             *frontproxy.FrontProxy
	agent          *testAgent
}

func startHarness(t *testing.T) *harness {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(testenv.RepoRoot(), "bin")
	}
	fp, err := frontproxy.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{fp: fp}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	// Aggregator routing off: the relay is reached through its
	// Service's ExternalName (there are no Endpoints; it runs in this
	// process).
	for k, v := range fp.APIServerFlags() {
		args.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("control plane (KUBEBUILDER_ASSETS=%s): %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	h.adminCfg = cfg
	if h.admin, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{relayNS, appNS} {
		create(t, h.admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	h.startRelay(t)
	h.startAgent(t)
	h.viewer = h.addUser(t, env, "viewer", rbacv1.PolicyRule{APIGroups: []string{relay.Group}, Resources: []string{"instances/log"}, Verbs: []string{"get"}})
	h.runner = h.addUser(t, env, "runner", rbacv1.PolicyRule{APIGroups: []string{relay.Group}, Resources: []string{"instances/run", "instances/exec"}, Verbs: []string{"get", "create"}})
	h.waitAvailable(t)
	return h
}

// startRelay registers the relay and runs it in this process.
//
// The API server runs on the host and reaches an aggregated API through
// its Service. Here the relay is a loopback port: a Service of type
// ExternalName "localhost" makes the API server dial localhost at the
// APIService's port (with --enable-aggregator-routing=false it resolves
// the Service, not its Endpoints), and verify the relay's certificate
// for unitlet-relay.unitlet-system.svc, the Service's name, as in a
// cluster. In a cluster the Service selects the relay's Pods instead.
func (h *harness) startRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.relayAddr = ln.Addr().String()
	port := int64(ln.Addr().(*net.TCPAddr).Port)
	create(t, h.admin, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: relayNS, Name: relay.ServiceName},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	})
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": relay.APIServiceName},
		"spec": map[string]any{
			"group": relay.Group, "version": relay.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": relayNS, "name": relay.ServiceName, "port": port},
		},
	}}
	create(t, h.admin, apiService)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- relay.Run(ctx, relay.Options{Config: h.adminCfg, Listener: ln, Namespace: relayNS,
			Service: relay.ServiceName, APIService: relay.APIServiceName, Log: testr.New(t)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
}

// startAgent starts the test agent once the relay published its CA, and
// publishes the agent's endpoint in its Enrollment, as an agent does.
func (h *harness) startAgent(t *testing.T) {
	var cm corev1.ConfigMap
	poll(t, "the relay CA ConfigMap", func(ctx context.Context) (bool, error) {
		err := h.admin.Get(ctx, client.ObjectKey{Namespace: relayNS, Name: relaytrust.CAName}, &cm)
		return err == nil, client.IgnoreNotFound(err)
	})
	h.agent = startTestAgent(t, node, []byte(cm.Data[relaytrust.CAConfigMapKey]))
	enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}}
	create(t, h.admin, enr)
	enr.Status.Endpoint = &v1.AgentEndpoint{Address: h.agent.addr, ServerName: agentapi.ServerName(node), CABundle: h.agent.caPEM}
	if err := h.admin.Status().Update(context.Background(), enr); err != nil {
		t.Fatal(err)
	}
	for name, on := range map[string]string{"web": node, "gone": node, "elsewhere": "vm2"} {
		create(t, h.admin, &v1.Instance{
			ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name},
			Spec: v1.InstanceSpec{Host: name + ".example.com", NodeName: on, Template: v1.Template{
				Command: []string{"/usr/bin/app"},
				Tier:    v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32},
			}},
		})
	}
}

// addUser makes a user the API server authenticates by client
// certificate, bound in the app namespace to a Role of rule.
func (h *harness) addUser(t *testing.T, env *envtest.Environment, name string, rule rbacv1.PolicyRule) *rest.Config {
	u, err := env.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	create(t, h.admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name}, Rules: []rbacv1.PolicyRule{rule}})
	create(t, h.admin, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	})
	return u.Config()
}

// waitAvailable waits until the API server proxies discovery to the
// relay (it verifies the relay against the caBundle the relay wrote).
func (h *harness) waitAvailable(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(h.viewer)
	poll(t, "the relay's discovery through the API server", func(context.Context) (bool, error) {
		_, err := dc.ServerResourcesForGroupVersion(relay.Group + "/" + relay.Version)
		return err == nil, nil
	})
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func poll(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func instancePath(name, sub string) string {
	return "/apis/" + relay.Group + "/" + relay.Version + "/namespaces/" + appNS + "/instances/" + name + "/" + sub
}

// exitCode is the code of client-go's exit error, -1 for another error.
func exitCode(err error) int {
	var e interface{ ExitStatus() int }
	if errors.As(err, &e) {
		return e.ExitStatus()
	}
	return -1
}
