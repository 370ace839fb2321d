package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// nodeVM is the fourth node: the Debian VM (systemd as PID 1, pure cgroup
// v2) running the agent with the DaemonSet's arguments. Its sockets are
// not on this machine, so the router does not reach it: it is cordoned
// before the drain.
const nodeVM = nodevm.Hostname

// vmAllocatable is what the VM's agent offers Instances: room for
// vmShare and more.
const vmAllocatable = 1 << 30

// vmShare is how many of the fleet's Instances select the VM.
const vmShare = 5

// vmInstance is an Instance for the emulated guest: there even the
// trampoline's start (the unitlet binary's) takes seconds of CPU, so it
// asks a tier of 300m, not the fleet's 30m.
func vmInstance(name, app string) *v1.Instance {
	inst := appInstance(name, app, v1.MovesNever)
	inst.Spec.Template.Tier.CPU = resource.MustParse("300m")
	return inst
}

var (
	vm *nodevm.VM
	// vmReady is closed once the VM booted and its agent was installed;
	// vmErr says why not.
	vmReady = make(chan struct{})
	vmErr   error
)

// bootVM boots the node VM and installs its agent, in the background of
// the suite's start; the first step waits for it.
func bootVM(adminKubeconfig []byte) {
	defer close(vmReady)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	agent, err := nodevm.DaemonSetAgent(nodeVM)
	if err != nil {
		vmErr = err
		return
	}
	kc, err := nodevm.GuestKubeconfig(adminKubeconfig, "localhost")
	if err != nil {
		vmErr = err
		return
	}
	if vm, err = nodevm.Boot(ctx, nodevm.Options{Forward: []int{agent.ProbePort}}); err != nil {
		vmErr = fmt.Errorf("boot the node VM: %w", err)
		return
	}
	out, err := vm.Run(ctx, "awk '/^MemTotal:/ {print $2}' /proc/meminfo")
	if err != nil {
		vmErr = err
		return
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		vmErr = fmt.Errorf("guest MemTotal %q: %w", out, err)
		return
	}
	reserve := "--reserved=memory=" + strconv.FormatInt(kb<<10-vmAllocatable, 10)
	if err := vm.InstallAgent(ctx, testutil.AgentBinary(), kc, agent, reserve, "--lease-namespace="+leaseNS, "--key-namespace="+keyNS); err != nil {
		vmErr = fmt.Errorf("install the agent in the node VM: %w", err)
	}
}

// joinVM waits for the VM, approves and labels its Enrollment and waits
// until it hosts.
func (f *fleet) joinVM(t *testing.T) {
	<-vmReady
	if vmErr != nil {
		if vm != nil {
			t.Logf("console (tail):\n%s", vm.ConsoleTail(30))
		}
		t.Fatal(vmErr)
	}
	approve(t, nodeVM, map[string]string{"zone": "vm"})
	waitHosting(t, nodeVM, 3*time.Minute)
	// Cordoned until the Instances of this machine's nodes are placed.
	if run := testutil.Plugin(t, kubeconfig, "cordon", nodeVM); run.Code() != 0 {
		t.Fatalf("cordon %s: %s%s", nodeVM, run.Stdout(), run.Stderr())
	}
	f.root.Cleanup(func() {
		if f.root.Failed() {
			out, _ := vm.Run(context.Background(), "journalctl -u "+nodevm.AgentService+" --no-pager -n 40 -o cat")
			t.Logf("the VM agent's last log lines:\n%s", out)
			out, _ = vm.Run(context.Background(), `ps -eo pid,stat,wchan:24,rss,args | grep -v '\]$' | tail -40; `+
				`for u in $(systemctl list-units --plain --no-legend 'unitlet-default-*' | awk '{print $1}' | head -3); do `+
				`systemctl status --no-pager -n 15 "$u"; cat /sys/fs/cgroup/$(systemctl show -p ControlGroup --value "$u")/memory.events; done`)
			t.Logf("the VM's processes and units:\n%s", out)
		}
	})
}

// vmKeys: each app on the VM runs with the key its Secret holds, which
// the cluster side minted: the VM's agent read it with its own narrow
// credentials. (That a node's reboot keeps each app's key is test/node's
// reboot step.)
func (f *fleet) vmKeys(t *testing.T) {
	checked := 0
	for _, name := range f.names {
		if !strings.HasPrefix(name, "app-vm-") {
			continue
		}
		checked++
		inst := getInstance(t, name)
		if got, want := guestKey(t, inst), string(keySecret(t, name).Data["key"]); got != want || got == "" {
			t.Errorf("%s runs on the VM with key %q, its Secret holds %q", name, got, want)
		}
	}
	if checked != vmShare {
		t.Errorf("checked %d apps on the VM, want the %d placed there", checked, vmShare)
	}
}

// guestKey is the UNITLET_INSTANCE_KEY in the environment of inst's
// serving generation's main process, read in the guest.
func guestKey(t *testing.T, inst *v1.Instance) string {
	t.Helper()
	var g *v1.Generation
	gens := generations(t, inst.Name)
	for i := range gens {
		if gens[i].Spec.Number == inst.Status.ActiveGeneration {
			g = &gens[i]
		}
	}
	if g == nil {
		t.Fatalf("%s: no generation %d", inst.Name, inst.Status.ActiveGeneration)
	}
	name := g.Name
	if g.Status.MainPID == 0 || !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady) {
		t.Fatalf("generation %s: main PID %d, %s", name, g.Status.MainPID, testutil.Conditions(g.Status.Conditions))
	}
	pid := int(g.Status.MainPID)
	return vm.ProcEnv(t, []int{pid}, v1.EnvInstanceKey)[pid]
}
