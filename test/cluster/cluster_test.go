package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/agent/selfinstall"
	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentimage"
	"github.com/unitlet/unitlet/internal/testkit/cluster"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestDaemonSet installs unitlet from config/default and walks the node
// through a user's first hour, in order.
func TestDaemonSet(t *testing.T) {
	testutil.RunSteps(t, "test/cluster", []testutil.Step{
		{Name: "install: the agent pod runs, the node joins", Run: install},
		{Name: "metrics: only an authorized scraper reads them", Run: metricsAuthorized},
		{Name: "approve: the samples serve", Run: approveAndServe},
		{Name: "nodewatch: NoAgent and NodeLost where no agent answers", Run: nodeWatch},
		{Name: "gc: an Enrollment is owned by its Node and goes with it", Run: enrollmentGC},
		{Name: "envFrom: read only where an administrator opted in", Run: envFromOptIn},
		{Name: "plugin: through the API server and the relay, view reads, edit runs", Run: pluginLogsAndRun},
		{Name: "swap: a template edit under load, 0 failed requests", Run: swapUnderLoad},
		{Name: "rollout: a new agent image restarts no app", Run: rollout},
		{Name: "evict: the agent pod deleted mid-swap, 0 failed requests", Run: evictMidSwap},
		{Name: "rollout during a mass swap: 20 Overlap swaps settle", Run: massRollout},
		{Name: "delete: an Instance leaves nothing on the node", Run: deleteOne},
		{Name: "uninstall: Instances first, then install.yaml", Run: uninstall},
	})
}

// install follows the operator guide's install from a release: the image
// archive (imported with the node's other images) named by the digest
// install.yaml pins, then install.yaml applied.
func install(t *testing.T) {
	manifests, err := os.ReadFile(rel.File("install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`unitlet\.dev/unitlet@sha256:[0-9a-f]{64}`).Find(manifests)
	if pinned == nil {
		t.Fatal("install.yaml pins no unitlet.dev/unitlet@sha256: image")
	}
	c.VM.MustRun(t, fmt.Sprintf("ctr -n k8s.io images tag unitlet.dev/unitlet:%s %s", rel.Version, pinned))
	kubectlIn(t, manifests, "apply", "--server-side", "-f", "-")
	// Ready means the agent works: the rollout completes before any
	// approval.
	kubectl(t, "rollout", "status", "-n", "unitlet-system", "ds/unitlet-agent", "--timeout=6m")
	routeRelay(t)
	var pod corev1.Pod
	eventually(t, "the agent pod Running on "+cluster.NodeName, 6*time.Minute, func() (bool, string) {
		pods, err := agentPods()
		if err != nil || len(pods) == 0 {
			return false, fmt.Sprint("no pod ", err)
		}
		pod = pods[0]
		return pod.Status.Phase == corev1.PodRunning, podState(&pod)
	})
	enr := &v1.Enrollment{}
	eventually(t, "the node's Enrollment with its checks", 3*time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: cluster.NodeName}, enr)
		return err == nil && enr.Status.MachineID != "" && len(enr.Status.Checks) > 0, fmt.Sprintf("%v %+v", err, enr.Status)
	})
	if enr.Spec.Approved {
		t.Fatal("the Enrollment came approved")
	}
	if pod.Spec.Containers[0].Image != string(pinned) || enr.Status.AgentVersion != rel.Version {
		t.Errorf("the agent runs %s and reports version %q, want the release's %s and %s",
			pod.Spec.Containers[0].Image, enr.Status.AgentVersion, pinned, rel.Version)
	}
	t.Logf("checks before approval: %+v", enr.Status.Checks)
}

func approveAndServe(t *testing.T) {
	kubectl(t, "patch", "enr", cluster.NodeName, "--type=merge", "-p", `{"spec":{"approved":true}}`)
	enr := &v1.Enrollment{}
	eventually(t, "Hosting=True", 3*time.Minute, func() (bool, string) {
		_ = k8s.Get(context.Background(), client.ObjectKey{Name: cluster.NodeName}, enr)
		return meta.IsStatusConditionTrue(enr.Status.Conditions, v1.ConditionHosting),
			testutil.Conditions(enr.Status.Conditions) + fmt.Sprintf(" %+v", enr.Status.Checks)
	})
	for _, f := range []string{"hosting_v1alpha1_instance_overlap.yaml", "hosting_v1alpha1_instance_replace.yaml"} {
		inst := testutil.Sample(t, f, cluster.NodeName)
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=180s", "inst/shop", "inst/ledger")
	unitRunsTheHelper(t, kube.Generation(t, "shop", 1).Status.Unit)
}

// unitRunsTheHelper: the unit starts the app and records its exit with
// the small helper the image holds beside the agent (installed beside it
// on the host), not the agent's binary, whose start-up would be charged
// to the app's tier.
func unitRunsTheHelper(t *testing.T, unit string) {
	t.Helper()
	helper := filepath.Join(filepath.Dir(nodevm.AgentBinary), selfinstall.ShimName)
	out := c.VM.MustRun(t, "systemctl show -p ExecStart -p ExecStopPost '"+unit+"'")
	for _, prop := range []string{"ExecStart=", "ExecStopPost="} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prop) {
				line = l
			}
		}
		if !strings.Contains(line, "path="+helper+" ") {
			t.Errorf("%s %s runs %q, want the helper %s", unit, prop, line, helper)
		}
	}
}

// envFromOptIn: with the shipped RBAC the agent reads a Secret only in a
// namespace an administrator opted in. Before the opt-in the Generation
// says so and names the command; after it, the app runs with the
// Secret's data in its environment.
func envFromOptIn(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-env", Namespace: testutil.Namespace},
		StringData: map[string]string{"DB_URL": "postgres://db.example/app"}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", cluster.NodeName)
	inst.Name, inst.Spec.Host = "configured", "configured.example.com"
	inst.Spec.Template.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.LocalObjectReference{Name: "app-env"}}}
	if err := k8s.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	optIn := "kubectl create rolebinding unitlet-agent-env -n " + testutil.Namespace
	eventually(t, "generation 1 refused its envFrom, naming the opt-in", 2*time.Minute, func() (bool, string) {
		g := &v1.Generation{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.Namespace, Name: "configured-g1"}, g); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionPrepared)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "EnvUnavailable" && strings.Contains(c.Message, optIn),
			testutil.Conditions(g.Status.Conditions)
	})
	kubectl(t, "create", "rolebinding", "unitlet-agent-env", "-n", testutil.Namespace,
		"--clusterrole=unitlet-agent-env-reader", "--serviceaccount=unitlet-system:unitlet-agent")
	eventually(t, "configured serving once opted in", 4*time.Minute, func() (bool, string) {
		i := kube.Instance(t, "configured")
		return i.Status.ActiveGeneration == 1 && meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady), testutil.Conditions(i.Status.Conditions)
	})
	pid := kube.Generation(t, "configured", 1).Status.MainPID
	if env := c.VM.MustRun(t, fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ", pid)); !strings.Contains(env, "DB_URL=postgres://db.example/app") {
		t.Errorf("the app's environment lacks the Secret's DB_URL:\n%s", env)
	}
	kube.DeleteAndWait(t, "configured", 3*time.Minute)
	leftOnNode(t, "configured")
}

// metricsAuthorized scrapes the agent's HTTPS metrics from the node as
// Prometheus would: refused without a token (401) and with a token the
// API server does not authorize (403), served to a ServiceAccount bound to
// unitlet-metrics-reader.
func metricsAuthorized(t *testing.T) {
	kubectl(t, "create", "serviceaccount", "-n", "unitlet-system", "scraper")
	kubectl(t, "create", "serviceaccount", "-n", "unitlet-system", "stranger")
	kubectl(t, "create", "clusterrolebinding", "scraper", "--clusterrole=unitlet-metrics-reader", "--serviceaccount=unitlet-system:scraper")
	ip := agentPod(t).Status.PodIP
	scrape := func(token string) string {
		return c.VM.MustRun(t, fmt.Sprintf(`python3 - <<'EOF'
import ssl, urllib.request, urllib.error
req = urllib.request.Request("https://%s:10261/metrics")
if %q: req.add_header("Authorization", "Bearer " + %q)
try:
    r = urllib.request.urlopen(req, context=ssl._create_unverified_context(), timeout=10)
    body = r.read().decode()
    limit = [int(float(l.split()[1])) for l in body.splitlines() if l.startswith("go_gc_gomemlimit_bytes ")]
    print(r.status, "unitlet_agent_mode" in body, limit)
except urllib.error.HTTPError as e:
    print(e.code)
EOF`, ip, token, token))
	}
	tokenOf := func(sa string) string {
		return strings.TrimSpace(kubectl(t, "create", "token", "-n", "unitlet-system", sa))
	}
	// The Go runtime's soft limit is the container's memory limit (the
	// DaemonSet's GOMEMLIMIT, from the downward API).
	limit, err := resource.ParseQuantity(strings.TrimSpace(kubectl(t, "get", "ds", "-n", "unitlet-system", "unitlet-agent",
		"-o", `jsonpath={.spec.template.spec.containers[?(@.name=="agent")].resources.limits.memory}`)))
	if err != nil {
		t.Fatalf("the agent's memory limit: %v", err)
	}
	scraped := fmt.Sprintf("200 True [%d]", limit.Value())
	for who, want := range map[string]string{"no token": "401", "stranger": "403", "scraper": scraped} {
		token := ""
		if who != "no token" {
			token = tokenOf(who)
		}
		var got string
		eventually(t, "metrics for "+who, time.Minute, func() (bool, string) {
			got = scrape(token)
			return got == want, got
		})
	}
}

func swapUnderLoad(t *testing.T) {
	inst := kube.Instance(t, "shop")
	c.VM.Front(t, inst.Status.Socket, "unitlet", frontPort)
	addr := fmt.Sprintf("127.0.0.1:%d", c.VM.HostPort(frontPort))
	kube.SwapUnderLoad(t, "shop", addr, 4, 500, func(i *v1.Instance) { i.Spec.Template.Env[0].Value = "shop-v2.example.com" })
}

// rollout moves the DaemonSet to another image: the agent pod is
// replaced, the apps keep running (same main pids and invocations) and
// are adopted by the new agent.
func rollout(t *testing.T) {
	before := []*v1.Generation{kube.Generation(t, "shop", 2), kube.Generation(t, "ledger", 1)}
	tar := filepath.Join(t.TempDir(), "next.tar")
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	beside, err := agentimage.ReadCompanions(filepath.Join(bin, "unitlet-shim-static"), filepath.Join(bin, "unitlet-cluster-static"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentimage.WriteFile(filepath.Join(bin, "unitlet-static"), beside, agentimage.Path, nextImage, tar); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tar)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VM.WriteFile(context.Background(), "/var/tmp/next.tar", b, 0o644); err != nil {
		t.Fatal(err)
	}
	c.VM.MustRun(t, "ctr -n k8s.io images import /var/tmp/next.tar && rm /var/tmp/next.tar")
	oldPod := agentPod(t).Name
	kubectl(t, "set", "image", "-n", "unitlet-system", "ds/unitlet-agent", "agent="+nextImage, "install-binary="+nextImage)
	kubectl(t, "rollout", "status", "-n", "unitlet-system", "ds/unitlet-agent", "--timeout=6m")
	eventually(t, "one agent pod, on the new image", 2*time.Minute, func() (bool, string) {
		pods, err := agentPods()
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprint(len(pods), " pods ", err)
		}
		p := pods[0]
		return p.Name != oldPod && p.Spec.Containers[0].Image == nextImage && p.Status.Phase == corev1.PodRunning, podState(&p)
	})
	for _, g := range before {
		now := kube.Generation(t, g.Spec.Instance, g.Spec.Number)
		if now.Status.MainPID != g.Status.MainPID || now.Status.InvocationID != g.Status.InvocationID {
			t.Errorf("%s restarted: pid %d invocation %s, was %d %s", g.Name, now.Status.MainPID, now.Status.InvocationID, g.Status.MainPID, g.Status.InvocationID)
		}
	}
	// The new agent has adopted them: a template edit is carried out.
	kube.UpdateInstance(t, "ledger", time.Minute, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	kube.WaitServing(t, "ledger", 2)
	kube.WaitServing(t, "shop", 2)
}

func deleteOne(t *testing.T) {
	kube.DeleteAndWait(t, "ledger", 3*time.Minute)
	leftOnNode(t, "ledger")
	// The agent leaves the host's claim; the cluster side's Deployment
	// gives it back once its holder is gone.
	eventually(t, "ledger.example.com's claim given back", time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: "ledger.example.com"}, &v1.HostClaim{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// uninstall removes what install.yaml installed, in the order
// docs/operator-guide.md gives: the Instances first, while the agent runs
// to release their finalizers, then the rest.
func uninstall(t *testing.T) {
	kubectl(t, "delete", "inst", "--all", "--all-namespaces", "--timeout=180s")
	leftOnNode(t, "shop")
	kubectl(t, "delete", "--ignore-not-found", "--timeout=180s", "-f", rel.File("install.yaml"))
	eventually(t, "the agent pod gone", 3*time.Minute, func() (bool, string) {
		var pods corev1.PodList
		err := k8s.List(context.Background(), &pods, client.InNamespace("unitlet-system"))
		return err == nil && len(pods.Items) == 0, fmt.Sprint(len(pods.Items), " pods ", err)
	})
}

// leftOnNode fails t when anything of the Instance name is left on the
// node: a unit, a cgroup, a run or data directory.
func leftOnNode(t *testing.T, name string) {
	t.Helper()
	if left := c.VM.Leftovers(t, testutil.Namespace, name); len(left) != 0 {
		t.Errorf("left of %s on the node: %v", name, left)
	}
}

func agentPod(t testing.TB) corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	// A step that rolled the DaemonSet may leave its old pod terminating
	// a while: wait for the one.
	eventually(t, "one agent pod", 2*time.Minute, func() (bool, string) {
		var err error
		pods, err = agentPods()
		return err == nil && len(pods) == 1, fmt.Sprintf("agent pods: %d, %v", len(pods), err)
	})
	return pods[0]
}

// agentPods are the DaemonSet's pods on the node VM (nodewatch's share
// the namespace). The gc step's kubelet-less Node gets a DaemonSet pod
// too, which lingers until the pod garbage collector sees that Node gone
// (CI once saw it outlive the next step's two-minute wait).
func agentPods() ([]corev1.Pod, error) {
	var list corev1.PodList
	err := k8s.List(context.Background(), &list, client.InNamespace("unitlet-system"),
		client.MatchingLabels{"app.kubernetes.io/name": "unitlet-agent"})
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == cluster.NodeName {
			pods = append(pods, p)
		}
	}
	return pods, err
}

// nextImage is the tag a rollout moves the DaemonSet to.
const nextImage = "unitlet.dev/unitlet:rollout"

func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf(" %s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf(" %s terminated %s (%d): %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			s += fmt.Sprintf(" %s=%s %s", cond.Type, cond.Status, cond.Message)
		}
	}
	return s
}

func eventually(t testing.TB, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, what, limit, pollEvery, cond)
}

func kubectl(t testing.TB, args ...string) string { t.Helper(); return kubectlIn(t, nil, args...) }

// kubectlIn runs bin/kubectl as the cluster's administrator.
func kubectlIn(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}
