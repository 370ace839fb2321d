package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
)

// fleetSize is how many Instances the node serves when it reboots.
const fleetSize = 20

// The reboot's Instances with a part to play.
const (
	// rebootSleepy is asleep: socket activation, idle, nothing running.
	rebootSleepy = "reboot-sleepy"
	// rebootSwap is mid-swap: its generation 2 starts slowly beside 1.
	rebootSwap = "reboot-swap"
	// rebootHeld is deleted, its kill unproven: a process of it sleeps
	// uninterruptibly on a frozen file system.
	rebootHeld = "reboot-held"
)

// nodeReboot: the node rebooted in place (same disk) while it served 20
// Instances, one asleep, one mid-swap, and one deleted whose kill was
// unproven. The reset is a hard one (nodevm.HardReset): the realistic,
// harsher case of a power cut or a watchdog, and the only one that does
// not wait on the frozen file system that holds the unkillable process
// (a clean `systemctl reboot` would stall on it until systemd's own
// timeouts give up). After boot: every Instance served again through its
// stable socket by a new generation numbered past the old ones; every
// generation of the old boot not proven gone before reads
// Terminated=True/NodeRebooted; nothing reads KillUnproven or
// StartUncertain; the held Instance's deletion completes (the reboot is
// its proof); data dirs kept with their owners, each app run with the
// instance key it had; nothing duplicated.
func nodeReboot(t *testing.T) {
	// What each part of the step took, for the step times.
	var parts []string
	mark := time.Now()
	part := func(what string) {
		parts = append(parts, fmt.Sprintf("%s %s", what, time.Since(mark).Round(100*time.Millisecond)))
		mark = time.Now()
	}
	fleet := fillNode(t)
	part("fill")
	// The held Instance's kill takes the agent's stop grace and proof
	// budget to be called unproven: the other parts go on meanwhile.
	holdDeleted(t)
	putToSleep(t)
	part("asleep")
	startSlowSwap(t)
	part("mid-swap")
	killUnproven(t, rebootHeld)
	part("held")
	old := snapshotBoot(t, append(fleet, rebootHeld))
	t.Logf("before the reboot: /etc/machine-id %s", guest(t, "findmnt -n /etc/machine-id >/dev/null && echo 'a transient mount (not on disk)' || echo 'on disk'"))

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	booted, err := vm.Reboot(ctx, nodevm.HardReset)
	if err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node after the reboot:\n%s", guest(t, "systemctl list-units --all --no-pager 'unitlet-*' | tail -40; "+
				"journalctl -b --no-pager -n 60 -u dbus.service -u 'unitlet-*' || true"))
		}
	})
	eventually(t, fmt.Sprintf("all %d Instances Ready after the reboot", len(fleet)), 5*time.Minute, func() (bool, string) {
		return fleetReady(t, fleet, old)
	})
	ready := time.Since(back)
	testutil.Report("test/node", fmt.Sprintf("node reboot, %d Instances, hard reset: reset to ssh %s, ssh to all Ready %s, reset to all Ready %s",
		len(fleet), booted.Round(100*time.Millisecond), ready.Round(100*time.Millisecond), (booted+ready).Round(100*time.Millisecond)))
	part("snapshot, reset and all Ready")

	servedAgain(t, fleet, old)
	oldBootGone(t, fleet, old)
	part("served again")
	eventually(t, rebootHeld+" deleted: the reboot proves its kill", 3*time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: rebootHeld}, &v1.Instance{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	part("held deleted")
	defer func() {
		part("checks")
		testutil.Report("test/node", "node reboot's parts: "+strings.Join(parts, ", "))
	}()
	if left := vm.Leftovers(t, testutil.Namespace, rebootHeld); len(left) != 0 {
		t.Errorf("left of %s on the node: %v", rebootHeld, left)
	}
	keptData(t, fleet, old)
	keptKeys(t, fleet, old)
	noDuplicates(t, fleet, old)
}

// fillNode brings the node to fleetSize Instances, the ones present and
// new ones (the asleep, the one to swap, small ones), and the one to
// hold beside them; it returns the fleet's names once all serve.
func fillNode(t *testing.T) []string {
	var list v1.InstanceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(testutil.Namespace)); err != nil {
		t.Fatal(err)
	}
	var fleet []string
	for _, i := range list.Items {
		fleet = append(fleet, i.Name)
	}
	sleepy := testutil.NewInstance(rebootSleepy, nodeName, testutil.NaiveApp(guestPython), func(i *v1.Instance) {
		i.Spec.SocketActivation = &v1.SocketActivation{IdleAfter: &metav1.Duration{Duration: 3 * time.Second}}
	})
	swap := testutil.Sample(t, "hosting_v1alpha1_instance_overlap.yaml", nodeName)
	swap.Name, swap.Spec.Host = rebootSwap, rebootSwap+".example.com"
	// The generation named by SLOW_GENERATION never binds its socket:
	// its start is in progress when the node goes down. The one after
	// the reboot has another number, so it starts at once.
	swap.Spec.Template.Args[1] = "import os, time\nif os.environ.get(\"UNITLET_GENERATION\") == os.environ.get(\"SLOW_GENERATION\"): time.sleep(3600)\n" + swap.Spec.Template.Args[1]
	swap.Spec.Template.Readiness.TimeoutSeconds = 900 // not aborted before the reboot
	news := []*v1.Instance{sleepy, swap}
	for n := 1; len(fleet)+len(news) < fleetSize; n++ {
		small := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
		small.Name = fmt.Sprintf("reboot-%02d", n)
		small.Spec.Host = small.Name + ".example.com"
		// The tiny static app: the step is about the reboot, and twenty
		// interpreters starting at once in an emulated guest took
		// minutes on each side of it.
		tinyapp.Serves(small.Name, 0)(small)
		small.Spec.Template.Readiness.TimeoutSeconds = 300
		news = append(news, small)
	}
	for _, i := range news {
		fleet = append(fleet, i.Name)
	}
	held := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	held.Name, held.Spec.Host = rebootHeld, rebootHeld+".example.com"
	tinyapp.Serves(held.Name, 0)(held)
	held.Spec.Template.Readiness.TimeoutSeconds = 300
	for _, i := range append(news, held) {
		if err := k8s.Create(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, fmt.Sprintf("%d Instances serving", len(fleet)+1), 4*time.Minute, func() (bool, string) {
		return fleetReady(t, append(fleet, rebootHeld), nil)
	})
	return fleet
}

// putToSleep waits until the sleepy Instance sleeps, after its
// generation 1 served.
func putToSleep(t *testing.T) {
	eventually(t, rebootSleepy+" asleep", 2*time.Minute, func() (bool, string) {
		i := kube.Instance(t, rebootSleepy)
		return asleep(i), testutil.Conditions(i.Status.Conditions)
	})
	kube.Generation(t, rebootSleepy, 1)
}

func asleep(i *v1.Instance) bool {
	c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReady)
	return i.Status.IdleSince != nil && i.Status.ActiveGeneration == 0 && c != nil && c.Status == "True" && c.Reason == v1.ReasonIdle
}

// startSlowSwap swaps the swap Instance to a generation 2 that never
// binds its socket, and waits until its process runs beside generation 1.
func startSlowSwap(t *testing.T) {
	kube.UpdateInstance(t, rebootSwap, time.Minute, func(i *v1.Instance) {
		i.Spec.Template.Env = append(i.Spec.Template.Env, v1.EnvVar{Name: "SLOW_GENERATION", Value: "2"})
	})
	eventually(t, rebootSwap+" generation 2 starting beside 1", 2*time.Minute, func() (bool, string) {
		g := &v1.Generation{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: rebootSwap + "-g2"}, g); err != nil {
			return false, err.Error()
		}
		i := kube.Instance(t, rebootSwap)
		return g.Status.MainPID != 0 && i.Status.ActiveGeneration == 1 && !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady),
			fmt.Sprintf("g2 pid %d %s; active %d", g.Status.MainPID, testutil.Conditions(g.Status.Conditions), i.Status.ActiveGeneration)
	})
}

// holdDeleted holds a process of the held Instance in D state and
// deletes the Instance. Its hold is never released: the reboot ends it.
func holdDeleted(t *testing.T) {
	holdIn(t, kube.Generation(t, rebootHeld, 1).Status.Cgroup)
	if err := k8s.Delete(context.Background(), kube.Instance(t, rebootHeld)); err != nil {
		t.Fatal(err)
	}
}

// killUnproven waits until Instance name reads KillUnproven=True.
func killUnproven(t *testing.T, name string) {
	eventually(t, name+" KillUnproven=True", 3*time.Minute, func() (bool, string) {
		i := kube.Instance(t, name)
		return meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionKillUnproven), testutil.Conditions(i.Status.Conditions)
	})
}

// fleetReady: every Instance of names is Ready, served by a generation
// numbered past the old boot's (any, when old is nil), or asleep with
// its stable socket bound in this boot (its run dir is a tmpfs).
func fleetReady(t *testing.T, names []string, old bootSnapshot) (bool, string) {
	var list v1.InstanceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(testutil.Namespace)); err != nil {
		return false, err.Error()
	}
	byName := map[string]v1.Instance{}
	for _, i := range list.Items {
		byName[i.Name] = i
	}
	var waiting []string
	for _, name := range names {
		i, ok := byName[name]
		switch {
		case !ok:
			waiting = append(waiting, name+": not found")
		case asleep(&i) && (old == nil || vm.MustRun(t, "test -S "+i.Status.Socket+" && echo bound || true") == "bound"):
		case !meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady) || i.Status.ActiveGeneration <= old[name].newest:
			waiting = append(waiting, fmt.Sprintf("%s: active %d %s; newest generation: %s", name, i.Status.ActiveGeneration,
				testutil.Conditions(i.Status.Conditions), newestGeneration(t, name)))
		}
	}
	return len(waiting) == 0, fmt.Sprintf("%d of %d: %s", len(names)-len(waiting), len(names), strings.Join(waiting, "; "))
}

// rebootGenerations lists the Generations of Instance name.
func rebootGenerations(t *testing.T, name string) []v1.Generation {
	t.Helper()
	var gens v1.GenerationList
	if err := k8s.List(context.Background(), &gens, client.InNamespace(testutil.Namespace), client.MatchingLabels{v1.LabelInstance: name}); err != nil {
		t.Fatal(err)
	}
	return gens.Items
}

// newestGeneration says what the Instance's newest Generation reports:
// newestGeneration is what the newest Generation of name reports.
func newestGeneration(t *testing.T, name string) string {
	return testutil.NewestGeneration(rebootGenerations(t, name))
}
