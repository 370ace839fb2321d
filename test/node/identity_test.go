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
	"github.com/unitlet/unitlet/runtime/identity"
)

// credentials is what the kernel says of a process: its four uids, its
// effective capabilities and no-new-privs.
func credentials(t *testing.T, pid int64) string {
	t.Helper()
	return guest(t, fmt.Sprintf(`awk '/^Uid:/{print $2,$3,$4,$5} /^CapEff:/{print $2} /^NoNewPrivs:/{print $2}' /proc/%d/status | paste -sd' '`, pid))
}

// ownUIDs: shop and ledger, without a user, run as uids of their own
// from the reserved range, own their data dirs and cannot read each
// other's; a template naming root starts nothing until an administrator
// grants root to its namespace on this node (a UserGrant), and then runs
// as uid 0 without capabilities.
func ownUIDs(t *testing.T) {
	uids := map[string]string{}
	for _, name := range []string{"shop", "ledger"} {
		inst := kube.Instance(t, name)
		g := kube.Generation(t, name, inst.Status.ActiveGeneration)
		f := strings.Fields(credentials(t, g.Status.MainPID))
		var uid int
		fmt.Sscan(f[0], &uid)
		if len(f) != 6 || f[1] != f[0] || f[2] != f[0] || f[3] != f[0] || !identity.DefaultRange.Contains(uid) || f[4] != "0000000000000000" || f[5] != "1" {
			t.Fatalf("%s runs as uids, CapEff, NoNewPrivs %v: want one uid of %s, no capability, no new privileges", name, f, identity.DefaultRange)
		}
		li, _ := nodevm.NodeLayout.Instance(testutil.Namespace, name)
		if owner := guest(t, "stat -c '%u %a' "+li.DataDir()); owner != f[0]+" 700" {
			t.Errorf("%s's data dir: owner and mode %q, want %s 700", name, owner, f[0])
		}
		uids[name] = f[0]
	}
	if uids["shop"] == uids["ledger"] {
		t.Fatalf("shop and ledger share uid %s", uids["shop"])
	}
	shop, _ := nodevm.NodeLayout.Instance(testutil.Namespace, "shop")
	ledger, _ := nodevm.NodeLayout.Instance(testutil.Namespace, "ledger")
	as := "setpriv --reuid=" + uids["shop"] + " --regid=" + uids["shop"] + " --clear-groups "
	if out := guest(t, as+"touch "+shop.DataDir()+"/own && echo wrote"); out != "wrote" {
		t.Errorf("shop's uid writing its data dir: %q", out)
	}
	if out := guest(t, as+"ls "+ledger.DataDir()+" 2>&1 || true"); !strings.Contains(out, "Permission denied") {
		t.Errorf("shop's uid listing ledger's data dir: %q, want Permission denied", out)
	}

	rooty := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	rooty.Name, rooty.Spec.Host, rooty.Spec.Template.User = "rooty", "rooty.example.com", "root"
	if err := k8s.Create(context.Background(), rooty); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rooty Stalled: UserNotGranted", time.Minute, func() (bool, string) {
		i := kube.Instance(t, "rooty")
		c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionStalled)
		return c != nil && c.Status == "True" && c.Reason == v1.ReasonUserNotGranted, testutil.Conditions(i.Status.Conditions)
	})
	if u := units(t); strings.Contains(strings.Join(u, " "), "rooty") {
		t.Fatalf("a unit of rooty exists: %v", u)
	}
	grantRoot(t)
	kube.WaitServing(t, "rooty", 1)
	// A granted root is uid 0 only in a user namespace of its own, whose
	// 0 is the Instance's own uid: the unit's main process is the
	// trampoline supervising it, dropped to that uid; the app its child.
	supervisor := kube.Generation(t, "rooty", 1).Status.MainPID
	f := strings.Fields(credentials(t, supervisor))
	var own int
	fmt.Sscan(f[0], &own)
	if len(f) != 6 || !identity.DefaultRange.Contains(own) || f[1] != f[0] || f[4] != "0000000000000000" || f[5] != "1" {
		t.Errorf("granted root's supervisor runs as %v, want the Instance's own uid with no capability and no new privileges", f)
	}
	// Every thread's children: the Go runtime forks from whichever
	// thread runs the starting goroutine, not always the main one.
	app := guest(t, fmt.Sprintf("cat /proc/%d/task/*/children", supervisor))
	if m := strings.Join(strings.Fields(guest(t, "cat /proc/"+strings.TrimSpace(app)+"/uid_map")), " "); m != "0 "+f[0]+" 1" {
		t.Errorf("granted root's app (pid %s) has uid_map %q, want uid 0 mapped to the Instance's own uid %s", app, m, f[0])
	}
	if a := strings.Fields(credentials(t, mustInt(t, app))); len(a) != 6 || a[0] != f[0] || a[4] != "0000000000000000" {
		t.Errorf("granted root's app is %v on the node, want uid %s with no capability", a, f[0])
	}
	kube.DeleteAndWait(t, "rooty", 3*time.Minute)
}

// grantRoot is the administrator's UserGrant of root to the test
// namespace on this node only, removed when the test ends.
func grantRoot(t *testing.T) {
	t.Helper()
	g := &v1.UserGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "root-" + testutil.Namespace},
		Spec:       v1.UserGrantSpec{User: "root", Namespaces: []string{testutil.Namespace}, Nodes: []string{nodeName}},
	}
	if err := k8s.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), g); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil {
		t.Fatalf("not a pid: %q", s)
	}
	return n
}
