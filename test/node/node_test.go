package node

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	unitsrt "github.com/unitlet/unitlet/runtime/units"
)

// TestNode walks one node through what its life holds, in order: each
// step builds on the state the one before left.
func TestNode(t *testing.T) {
	testutil.RunSteps(t, "test/node", []testutil.Step{
		{Name: "join: nothing hosted until approved", Run: join},
		{Name: "apply: Ready, v2 limits on the unit's cgroup", Run: applyReady},
		{Name: "overlap swap under load: 0 failed requests", Run: overlapUnderLoad},
		{Name: "a naive app: 3 swaps, 10,000 requests, drains proven", Run: naiveSwaps},
		{Name: "socket activation: the same, the socket the agent's", Run: activatedSwaps},
		{Name: "a held request: the old generation waits to answer it", Run: heldAcrossSwap},
		{Name: "wake on demand: asleep, answered at the first request", Run: wakeOnDemand},
		{Name: "replace: the old generation proven gone first", Run: replaceInOrder},
		{Name: "identity: a uid of its own each, root only when allowed", Run: ownUIDs},
		{Name: "escape matrix: no tenant reaches another or the node", Run: escapeMatrix},
		{Name: "suspend and resume", Run: suspendResume},
		{Name: "agent restart: no app restarted, logs flow", Run: agentRestart},
		{Name: "node reboot: served again, the old boot proven gone", Run: nodeReboot},
		{Name: "memory limit: the app OOM-killed and reported", Run: oomKilled},
		{Name: "unproven kill: finalizer kept until the proof", Run: unprovenKill},
		{Name: "delete: nothing left on the node", Run: deleteAll},
	})
}

func join(t *testing.T) {
	// Ready (the agent works, a rollout may go on) yet not hosting.
	eventually(t, "/readyz 200 and /hostingz 503 while the node joins", 3*time.Minute, func() (bool, string) {
		r, h := readyz(), probe("/hostingz")
		return r == http.StatusOK && h == http.StatusServiceUnavailable, fmt.Sprintf("readyz %d, hostingz %d", r, h)
	})
	enr := &v1.Enrollment{}
	eventually(t, "the node's Enrollment with its identity and checks", time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: nodeName}, enr)
		return err == nil && enr.Status.MachineID != "" && len(enr.Status.Checks) > 0, fmt.Sprintf("%v %+v", err, enr.Status)
	})
	if enr.Spec.Approved {
		t.Fatal("the agent's Enrollment came approved")
	}
	if enr.Status.CgroupMode != "v2" || enr.Status.UnitBackend != "systemd" {
		t.Errorf("Enrollment says cgroups %q, backend %q; want v2, systemd", enr.Status.CgroupMode, enr.Status.UnitBackend)
	}
	// Applied before the approval: nothing of it may run.
	shop := testutil.Sample(t, "hosting_v1alpha1_instance_overlap.yaml", nodeName)
	if err := k8s.Create(context.Background(), shop); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if u := units(t); len(u) != 0 {
		t.Fatalf("units before the approval: %v", u)
	}

	enr.Spec.Approved = true
	if err := k8s.Update(context.Background(), enr); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Hosting=True", 2*time.Minute, func() (bool, string) {
		_ = k8s.Get(context.Background(), client.ObjectKey{Name: nodeName}, enr)
		return meta.IsStatusConditionTrue(enr.Status.Conditions, v1.ConditionHosting), testutil.Conditions(enr.Status.Conditions)
	})
	eventually(t, "/hostingz 200", time.Minute, func() (bool, string) {
		c := probe("/hostingz")
		return c == http.StatusOK, fmt.Sprintf("status %d", c)
	})
	// It renews its node's Lease with the Role config/rbac gives it.
	eventually(t, "the node's Lease renewed", time.Minute, func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "unitlet-system", Name: nodeName}, l); err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 30*time.Second, l.Spec.RenewTime.String()
	})
	// The agent made the socket group it was told to use.
	if g := guest(t, "getent group unitlet"); !strings.HasPrefix(g, "unitlet:") {
		t.Errorf("socket group: %q", g)
	}
}

func applyReady(t *testing.T) {
	inst := kube.WaitServing(t, "shop", 1)
	g := kube.Generation(t, "shop", 1)
	if body := unixGet(t, inst.Status.Socket, "/"); body != "hello from shop.example.com generation 1" {
		t.Errorf("through the stable socket: %q", body)
	}
	// systemd wrote the tier into the unit's v2 cgroup; the kernel reads
	// it back. 128Mi, 500m, 512 pids (the sample's tier) and the
	// platform's own tasks.
	cg := "/sys/fs/cgroup" + g.Status.Cgroup
	got := guest(t, fmt.Sprintf("cat %[1]s/memory.max %[1]s/pids.max %[1]s/cpu.max", cg))
	if want := fmt.Sprintf("134217728\n%d\n50000 100000", 512+unitsrt.PlatformTasks); got != want {
		t.Errorf("%s limits:\n%s\nwant:\n%s", cg, got, want)
	}
	if pids := guest(t, "cat "+cg+"/cgroup.procs"); !strings.Contains(pids, strconv.FormatInt(g.Status.MainPID, 10)) {
		t.Errorf("main pid %d not in %s (%s)", g.Status.MainPID, cg, pids)
	}
	// The generation's watch listens to systemd's signals on the system
	// bus (the pod's mount of it), not polling each unit.
	log := guest(t, "journalctl -u "+agentService+" --no-pager -o cat | grep -E 'unit signals' || true")
	if !strings.Contains(log, "unit signals heard") || strings.Contains(log, "no unit signals") {
		t.Errorf("the agent's watches do not hear unit signals; its log says:\n%s", log)
	}
}

func overlapUnderLoad(t *testing.T) {
	inst := kube.Instance(t, "shop")
	vm.Front(t, inst.Status.Socket, "unitlet", frontPort)
	addr := fmt.Sprintf("127.0.0.1:%d", vm.HostPort(frontPort))
	l := kube.SwapUnderLoad(t, "shop", addr, 4, 1000, func(i *v1.Instance) { i.Spec.Template.Env[0].Value = "shop-v2.example.com" })
	bodies := l.Bodies()
	if bodies["hello from shop.example.com generation 1\n"] == 0 || bodies["hello from shop-v2.example.com generation 2\n"] == 0 {
		t.Fatalf("want answers from both generations, got %v", bodies)
	}
	// The raised overlap limit is restored on the slice once g1 is gone.
	slice := "/sys/fs/cgroup" + parentCgroup(kube.Generation(t, "shop", 2).Status.Cgroup)
	eventually(t, "slice limit restored to the tier", time.Minute, func() (bool, string) {
		got := guest(t, "cat "+slice+"/memory.max")
		return got == "134217728", got
	})
}

func replaceInOrder(t *testing.T) {
	ledger := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	if err := k8s.Create(context.Background(), ledger); err != nil {
		t.Fatal(err)
	}
	kube.WaitServing(t, "ledger", 1)
	kube.UpdateInstance(t, "ledger", time.Minute, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	inst := kube.WaitServing(t, "ledger", 2)
	g1, g2 := kube.Generation(t, "ledger", 1), kube.Generation(t, "ledger", 2)
	proof := meta.FindStatusCondition(g1.Status.Conditions, v1.ConditionTerminated)
	if proof == nil || proof.Status != "True" || g2.Status.StartedAt == nil || g2.Status.StartedAt.Before(&proof.LastTransitionTime) {
		t.Fatalf("Replace: generation 2 started at %v, generation 1 proven gone at %v", g2.Status.StartedAt, proof)
	}
	// The same order to the microsecond, from the node's own words:
	// generation 1's exit record (its ExecStopPost) against systemd's
	// start timestamp of generation 2's main process.
	li := guestLayout(t, "ledger")
	exit1, err := testutil.ExitRecord(func(p string) ([]byte, error) {
		out, err := vm.Run(context.Background(), "cat "+p)
		return []byte(out), err
	}, li, 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := li.Generation(2)
	if err != nil {
		t.Fatal(err)
	}
	started2, err := time.Parse("Mon 2006-01-02 15:04:05.000000 MST",
		guest(t, "systemctl show -P ExecMainStartTimestamp --timestamp=us+utc "+p2.UnitName()))
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckReplaceOrder(t, "ledger", exit1.At, started2)
	if body := unixGet(t, inst.Status.Socket, "/"); body != "ledger ok" {
		t.Errorf("ledger answers %q", body)
	}
	if n := guest(t, "test -d /sys/fs/cgroup"+g1.Status.Cgroup+" && echo present || echo gone"); n != "gone" {
		t.Errorf("generation 1's cgroup %s is %s", g1.Status.Cgroup, n)
	}
}

func suspendResume(t *testing.T) {
	g := kube.Generation(t, "ledger", 2)
	slice := "/sys/fs/cgroup" + parentCgroup(g.Status.Cgroup)
	kube.UpdateInstance(t, "ledger", time.Minute, func(i *v1.Instance) { i.Spec.Suspend = true })
	eventually(t, "suspended", 2*time.Minute, func() (bool, string) {
		i := kube.Instance(t, "ledger")
		c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReady)
		return c != nil && c.Reason == v1.ReasonSuspended && c.Status == "True", testutil.Conditions(i.Status.Conditions)
	})
	if n := guest(t, "cat "+slice+"/cgroup.procs 2>/dev/null | wc -l"); n != "0" {
		t.Errorf("suspended, yet %s processes in %s", n, slice)
	}
	guest(t, "test -d /var/lib/unitlet/instances/default/ledger") // the data stays
	kube.UpdateInstance(t, "ledger", time.Minute, func(i *v1.Instance) { i.Spec.Suspend = false })
	kube.WaitServing(t, "ledger", 3)
}

func agentRestart(t *testing.T) {
	ticker := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	ticker.Name, ticker.Spec.Host = "ticker", "ticker.example.com"
	ticker.Spec.Template.Args = []string{"-c", `import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(os.environ["UNITLET_APP_SOCKET"]); s.listen(16)
n = 0
while True:
    n += 1; print("tick", n, flush=True); time.sleep(0.2)
`}
	if err := k8s.Create(context.Background(), ticker); err != nil {
		t.Fatal(err)
	}
	kube.WaitServing(t, "ticker", 1)
	shop, ledger := kube.Generation(t, "shop", 2), kube.Generation(t, "ledger", 3)
	logFile := "/var/lib/unitlet/logs/default/ticker/app.log"
	ticks := func() int {
		n, _ := strconv.Atoi(guest(t, "grep -c tick "+logFile+" || true"))
		return n
	}
	for _, how := range []string{"systemctl restart " + agentService, "systemctl kill -s KILL " + agentService} {
		before := ticks()
		pidBefore := guest(t, "systemctl show -p MainPID --value "+agentService)
		guest(t, how)
		eventually(t, "the agent back after "+how, 2*time.Minute, func() (bool, string) {
			pid := guest(t, "systemctl show -p MainPID --value "+agentService)
			return pid != "0" && pid != pidBefore && readyz() == http.StatusOK, "pid " + pid
		})
		eventually(t, "log lines after "+how, time.Minute, func() (bool, string) {
			n := ticks()
			return n > before+10, fmt.Sprintf("%d lines, %d before", n, before)
		})
	}
	// The same processes still serve: nothing was restarted.
	for _, g := range []*v1.Generation{shop, ledger} {
		now := kube.Generation(t, g.Spec.Instance, g.Spec.Number)
		if now.Status.MainPID != g.Status.MainPID || now.Status.InvocationID != g.Status.InvocationID {
			t.Errorf("%s: pid %d invocation %s, was %d %s", g.Name, now.Status.MainPID, now.Status.InvocationID, g.Status.MainPID, g.Status.InvocationID)
		}
		if out := guest(t, fmt.Sprintf("test -d /proc/%d && echo alive || echo gone", g.Status.MainPID)); out != "alive" {
			t.Errorf("%s: main pid %d %s", g.Name, g.Status.MainPID, out)
		}
	}
	if n := len(kube.Instance(t, "shop").Status.Conditions); n == 0 {
		t.Error("shop lost its conditions")
	}
	kube.WaitServing(t, "shop", 2)
	kube.WaitServing(t, "ledger", 3)
}

func oomKilled(t *testing.T) {
	hog := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	hog.Name, hog.Spec.Host = "hog", "hog.example.com"
	// Ready on its socket, then it asks for four times its tier.
	hog.Spec.Template.Args = []string{"-c", `import os, socket, time
s = socket.socket(socket.AF_UNIX); s.bind(os.environ["UNITLET_APP_SOCKET"]); s.listen(16)
time.sleep(3)
b = bytearray(256 << 20)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(600)
`}
	if err := k8s.Create(context.Background(), hog); err != nil {
		t.Fatal(err)
	}
	var g *v1.Generation
	eventually(t, "generation 1 of hog killed", 3*time.Minute, func() (bool, string) {
		g = &v1.Generation{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: "hog-g1"}, g); err != nil {
			return false, err.Error()
		}
		return g.Status.Exit != nil && g.Status.Exit.Signal != "", fmt.Sprintf("%s exit %+v", g.Status.Phase, g.Status.Exit)
	})
	if !strings.Contains(g.Status.Exit.Signal, "KILL") {
		t.Errorf("exit %+v, want killed by SIGKILL", g.Status.Exit)
	}
	// The kernel's word: the unit's memory cgroup hit its limit.
	if log := guest(t, "dmesg | grep oom-kill | grep -c "+strings.TrimPrefix(g.Status.Cgroup, "/")+" || true"); log == "0" {
		t.Errorf("no oom-kill of %s in the kernel log", g.Status.Cgroup)
	}
	kube.DeleteAndWait(t, "hog", 3*time.Minute)
}

func unprovenKill(t *testing.T) {
	g := kube.Generation(t, "ticker", kube.Instance(t, "ticker").Status.ActiveGeneration)
	held := holdIn(t, g.Status.Cgroup)
	inst := kube.Instance(t, "ticker")
	if err := k8s.Delete(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	killUnproven(t, "ticker")
	// The finalizer is kept: the Instance is still there.
	i := kube.Instance(t, "ticker")
	if i.DeletionTimestamp == nil || len(i.Finalizers) == 0 {
		t.Fatalf("deleted with an unproven kill: deletion %v, finalizers %v", i.DeletionTimestamp, i.Finalizers)
	}
	held.release(t)
	eventually(t, "ticker gone once the kill is proven", 3*time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(inst), inst)
		return err != nil && client.IgnoreNotFound(err) == nil, testutil.Conditions(inst.Status.Conditions)
	})
}

func deleteAll(t *testing.T) {
	var list v1.InstanceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(testutil.Namespace)); err != nil {
		t.Fatal(err)
	}
	// All at once, as a namespace's deletion would; then each waited for.
	for i := range list.Items {
		if err := k8s.Delete(context.Background(), &list.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	for _, i := range list.Items {
		kube.DeleteAndWait(t, i.Name, 3*time.Minute)
	}
	// The namespace's slice (unitlet-default.slice) is the platform's, as
	// the kubelet's kubepods slices are: it stays, empty. Nothing of an
	// Instance does.
	if left := vm.Leftovers(t, testutil.Namespace, ""); len(left) != 0 {
		t.Errorf("left on the node: %v", left)
	}
}

// parentCgroup is the instance slice of a unit's cgroup.
func parentCgroup(cg string) string { return cg[:strings.LastIndex(cg, "/")] }
