package node

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// bootSnapshot is what the old boot left, per Instance: its generations
// not proven gone then, its newest generation's number, its data dir's
// owner, and the instance key it ran with ("" when nothing ran).
type bootSnapshot map[string]struct {
	live     []int64
	newest   int64
	uid, key string
}

func snapshotBoot(t *testing.T, names []string) bootSnapshot {
	t.Helper()
	owners, keys := dataOwners(t, names), runningKeys(t, names)
	out := bootSnapshot{}
	for _, name := range names {
		s := out[name]
		for _, g := range rebootGenerations(t, name) {
			s.newest = max(s.newest, g.Spec.Number)
			if !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
				s.live = append(s.live, g.Spec.Number)
			}
		}
		s.uid, s.key = owners[name], keys[name]
		out[name] = s
	}
	if s := out[rebootSwap]; len(s.live) != 2 {
		t.Fatalf("%s: live generations %v before the reboot, want 1 and 2 (mid-swap)", rebootSwap, s.live)
	}
	if s := out[rebootSleepy]; len(s.live) != 0 {
		t.Fatalf("%s: live generations %v before the reboot, want none (asleep)", rebootSleepy, s.live)
	}
	return out
}

// dataOwners is the owner uid of each Instance's data dir, read in one
// go in the guest.
func dataOwners(t *testing.T, names []string) map[string]string {
	t.Helper()
	var dirs []string
	for _, name := range names {
		li, err := nodevm.NodeLayout.Instance(testutil.Namespace, name)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, li.DataDir())
	}
	out := map[string]string{}
	for i, line := range strings.Split(guest(t, "stat -c %u "+strings.Join(dirs, " ")), "\n") {
		out[names[i]] = line
	}
	return out
}

// servedAgain: each Instance answers through its stable socket (the
// ticker only accepts: a connect), by a generation past the old boot's;
// the sleepy one is woken by that request.
func servedAgain(t *testing.T, fleet []string, old bootSnapshot) {
	t.Helper()
	var args []string
	for _, name := range fleet {
		mode := "get"
		if name == "ticker" {
			mode = "connect"
		}
		args = append(args, name, kube.Instance(t, name).Status.Socket, mode)
	}
	out := guest(t, `python3 - `+strings.Join(args, " ")+` <<'EOF'
import socket, sys
a = sys.argv[1:]
for name, path, mode in zip(a[0::3], a[1::3], a[2::3]):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(path)
        if mode == "connect":
            print(name, "200 connected"); continue
        s.sendall(b"GET / HTTP/1.0\r\n\r\n"); b = b""
        while True:
            c = s.recv(4096)
            if not c: break
            b += c
        head, _, body = b.partition(b"\r\n\r\n")
        print(name, head.split(b" ")[1].decode(), body.decode().strip().replace("\n", " "))
    except Exception as e:
        print(name, "error", repr(e).replace("\n", " "))
EOF`)
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || f[1] != "200" {
			t.Errorf("through its stable socket after the reboot: %q", line)
			continue
		}
		// The naive and the overlap apps say their generation.
		if i := strings.LastIndex(f[2], "generation "); i >= 0 {
			if n, _ := strconv.ParseInt(f[2][i+len("generation "):], 10, 64); n <= old[f[0]].newest {
				t.Errorf("%s answered by generation %d after the reboot; the old boot had made up to %d", f[0], n, old[f[0]].newest)
			}
		}
	}
	for _, name := range fleet {
		inst := kube.Instance(t, name)
		if name != rebootSleepy && inst.Status.ActiveGeneration <= old[name].newest {
			t.Errorf("%s served by generation %d after the reboot; the old boot had made up to %d", name, inst.Status.ActiveGeneration, old[name].newest)
		}
		for _, typ := range []string{v1.ConditionKillUnproven, v1.ConditionStartUncertain} {
			if meta.IsStatusConditionTrue(inst.Status.Conditions, typ) {
				t.Errorf("%s reads %s=True after the reboot: %s", name, typ, testutil.Conditions(inst.Status.Conditions))
			}
		}
	}
}

// oldBootGone: every generation of the old boot not proven gone before
// reads Terminated=True/NodeRebooted, its start settled, its kill not
// called unproven. The held Instance's may be gone with it.
func oldBootGone(t *testing.T, fleet []string, old bootSnapshot) {
	t.Helper()
	for _, name := range append(fleet, rebootHeld) {
		for _, n := range old[name].live {
			g := &v1.Generation{}
			err := k8s.Get(t.Context(), client.ObjectKey{Namespace: testutil.Namespace, Name: fmt.Sprintf("%s-g%d", name, n)}, g)
			if name == rebootHeld && errors.IsNotFound(err) {
				continue // deleted with its Instance, the deletion checked apart
			}
			if err != nil {
				t.Fatalf("%s generation %d of the old boot: %v", name, n, err)
			}
			c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated)
			if c == nil || c.Status != "True" || c.Reason != v1.ReasonNodeRebooted ||
				meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionKillUnproven) ||
				meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionStartUncertain) {
				t.Errorf("%s generation %d of the old boot reads %s", name, n, testutil.Conditions(g.Status.Conditions))
			}
		}
	}
}

// keptData: every data dir is there with its owner of the old boot.
func keptData(t *testing.T, fleet []string, old bootSnapshot) {
	t.Helper()
	for name, uid := range dataOwners(t, fleet) {
		if uid != old[name].uid {
			t.Errorf("%s's data dir was uid %s's before the reboot, %s's after", name, old[name].uid, uid)
		}
	}
}

// noDuplicates: exactly one running app unit per Instance (at most one
// for the sleepy, which falls asleep again), its active generation's, and
// no unit of the old boot's generations loaded.
func noDuplicates(t *testing.T, fleet []string, old bootSnapshot) {
	t.Helper()
	loaded := map[string]string{}
	for _, line := range strings.Split(guest(t, "systemctl list-units --all --plain --no-legend --type=service 'unitlet-*' | awk '{print $1, $3\"/\"$4}'"), "\n") {
		if unit, state, ok := strings.Cut(line, " "); ok {
			loaded[unit] = state
		}
	}
	for _, name := range fleet {
		inst := kube.Instance(t, name)
		var running []int64
		for _, g := range rebootGenerations(t, name) {
			state, ok := loaded[g.Status.Unit]
			if g.Status.Unit == "" || !ok {
				continue
			}
			if g.Spec.Number <= old[name].newest {
				t.Errorf("%s: unit %s of the old boot's generation %d is loaded (%s)", name, g.Status.Unit, g.Spec.Number, state)
			}
			if state == "active/running" {
				running = append(running, g.Spec.Number)
			}
		}
		switch {
		case name == rebootSleepy && (len(running) == 0 || len(running) == 1 && running[0] > old[name].newest):
		case len(running) != 1 || running[0] != inst.Status.ActiveGeneration:
			t.Errorf("%s: generations running %v, want exactly the active one (%d)", name, running, inst.Status.ActiveGeneration)
		}
	}
}
