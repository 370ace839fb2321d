// Package node runs the real agent the way users run it, on a node shaped
// like theirs: bin/unitlet inside a Debian 12 VM (systemd as PID 1, pure
// cgroup v2, internal/nodevm), started by a systemd service with exactly
// the DaemonSet's arguments and host paths, under the agent's ClusterRole,
// talking to the kube-apiserver this test starts on this machine.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
)

// nodeName is the guest's hostname: the DaemonSet passes spec.nodeName,
// which on a real node is its hostname too.
const nodeName = nodevm.Hostname

const (
	// agentService is the agent's service in the guest.
	agentService = nodevm.AgentService
	// frontPort is nginx's port in the guest (the front end's).
	frontPort = 8088
)

// pollEvery is how often waits look again; the guest is emulated, so the
// limits below are generous.
const pollEvery = 250 * time.Millisecond

var (
	env  *testenv.Env
	k8s  client.Client
	kube testutil.API
	vm   *nodevm.VM
	// agent is how the DaemonSet runs the agent on this node.
	agent nodevm.Agent
	// probePort is the guest port of /healthz and /readyz.
	probePort int
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "test/node:", err); return 1 }
	exe, err := testutil.Preflight("test/node", "it boots a VM with QEMU")
	if err != nil {
		return fail(err)
	}
	if agent, err = nodevm.DaemonSetAgent(nodeName); err != nil {
		return fail(err)
	}
	probePort = agent.ProbePort
	// The guest boots while the API server starts and the agent's
	// credentials are made: the boot needs none of them.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	started := time.Now()
	booted := nodevm.BootAsync(ctx, nodevm.Options{Forward: []int{probePort, frontPort}, Reboots: true})
	defer func() {
		if vm, _ := booted(); vm != nil {
			vm.Close()
		}
	}()
	if env, err = testenv.Start(); err != nil {
		return fail(err)
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	kube = testutil.API{Client: k8s, Every: pollEvery}
	// The cluster side's key minter, as `unitlet cluster` runs it: no
	// Instance makes a generation without its key.
	keyCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	if err := keyminter.Start(keyCtx, env.Config); err != nil {
		return fail(err)
	}
	kubeconfig, err := agentCredentials(context.Background())
	if err != nil {
		return fail(err)
	}
	if vm, err = booted(); err != nil {
		return fail(err)
	}
	if err := tinyapp.Install(ctx, vm); err != nil {
		return fail(err)
	}
	if err := vm.InstallAgent(ctx, exe, kubeconfig, agent); err != nil {
		fmt.Fprintln(os.Stderr, vm.ConsoleTail(40))
		return fail(err)
	}
	testutil.Report("test/node", fmt.Sprintf("API server, guest (%s) and agent installed in %s",
		vm.HowBooted(), time.Since(started).Round(100*time.Millisecond)))
	code := m.Run()
	if code != 0 {
		out, _ := vm.Run(context.Background(), "journalctl -u "+agentService+" --no-pager -n 80 -o cat")
		fmt.Fprintf(os.Stderr, "test/node: the agent's last log lines:\n%s\n", out)
	}
	if out, err := vm.CPUSpent(context.Background()); err == nil {
		testutil.Report("test/node", out)
	}
	fmt.Printf("test/node: boot, install and flows took %s\n", time.Since(started).Round(time.Second))
	return code
}

// agentCredentials makes the agent's user, bound to the shipped
// ClusterRole (config/rbac/role.yaml) and nothing else, and returns a
// kubeconfig for it that reaches the API server from inside the guest.
func agentCredentials(ctx context.Context) ([]byte, error) {
	const user = "unitlet-agent:" + nodeName
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	// The ClusterRole, then a Role per namespace: the agent's own (its
	// Lease) and the key namespace (a key Secret, get only).
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) < 2 {
		return nil, fmt.Errorf("config/rbac/role.yaml: %d documents, want the ClusterRole and the Roles", len(docs))
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(docs[0]), &role); err != nil {
		return nil, err
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	objs := []client.Object{
		&role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: role.ObjectMeta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}},
	}
	for _, doc := range docs[1:] {
		nsRole := &rbacv1.Role{}
		if err := yaml.Unmarshal([]byte(doc), nsRole); err != nil {
			return nil, err
		}
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsRole.Namespace}}, nsRole,
			&rbacv1.RoleBinding{ObjectMeta: nsRole.ObjectMeta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nsRole.Name}})
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create %T: %w", o, err)
		}
	}
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		return nil, err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, err
	}
	// envtest's serving certificate names localhost only.
	return nodevm.GuestKubeconfig(kc, "localhost")
}
