package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// appScript answers every request with its generation and the instance
// key it was given, and on SIGTERM serves on for two seconds (what it
// accepted finishes) before it stops. It imports little and runs with -S:
// its tier's CPU is small and the node VM is emulated.
const appScript = `
import os, signal, socket, threading
body = ("gen=%s key=%s\n" % (os.environ.get("UNITLET_GENERATION", "?"), os.environ.get("UNITLET_INSTANCE_KEY", ""))).encode()
answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(os.environ["UNITLET_APP_SOCKET"])
srv.listen(512)
def one(c):
    try:
        got = b""
        while b"\r\n\r\n" not in got:
            part = c.recv(4096)
            if not part:
                break
            got += part
        c.sendall(answer)
    finally:
        c.close()
signal.signal(signal.SIGTERM, lambda *a: threading.Timer(2.0, lambda: os._exit(0)).start())
while True:
    c, _ = srv.accept()
    threading.Thread(target=one, args=(c,), daemon=True).start()
`

// tierMemory is each Instance's tier (as the samples': what an app and
// the page cache its start reads take on a cgroup v2 node): 56 of them
// fit a node of this machine, 5 the VM.
var tierMemory = resource.MustParse("128Mi")

// appInstance is an unpinned Instance of the fleet's app.
func appInstance(name, app string, moves v1.MovePolicy) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: v1.InstanceSpec{
			Host:      name + ".fleet.example",
			Strategy:  v1.StrategyOverlap,
			Placement: &v1.Placement{Moves: moves, LostAfterSeconds: ptr.To[int32](5)},
			Template: v1.Template{
				Command:   []string{"/usr/bin/python3", "-c", appScript},
				Tier:      v1.Tier{Memory: tierMemory, CPU: resource.MustParse("10m"), Pids: 64},
				Readiness: &v1.Readiness{Socket: &v1.SocketProbe{}, TimeoutSeconds: 240},
			},
			DrainLimitSeconds: ptr.To[int32](20),
		},
	}
}

func getInstance(t testing.TB, name string) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, inst); err != nil {
		t.Fatalf("instance %s: %v", name, err)
	}
	return inst
}

func listInstances(t testing.TB) []v1.Instance {
	t.Helper()
	var list v1.InstanceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func generations(t testing.TB, inst string) []v1.Generation {
	t.Helper()
	var list v1.GenerationList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1.LabelInstance: inst}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// serving: the Instance is Ready and its serving generation is on the
// node its status names.
func serving(inst *v1.Instance) bool {
	return meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady) &&
		inst.Status.NodeName != "" && inst.Status.ActiveGeneration > 0
}

// waitAllServing waits until every Instance named serves.
func waitAllServing(t *testing.T, names []string, limit time.Duration) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%d Instances serving", len(names)), limit, 500*time.Millisecond, func() (bool, string) {
		var waiting []string
		for _, n := range names {
			inst := getInstance(t, n)
			if !serving(inst) {
				waiting = append(waiting, n+" on "+inst.Spec.NodeName+" ("+testutil.Conditions(inst.Status.Conditions)+"; newest generation: "+newestGeneration(t, n)+")")
			}
		}
		if len(waiting) > 0 {
			return false, fmt.Sprintf("%d not serving, e.g. %s", len(waiting), strings.Join(waiting[:min(3, len(waiting))], "; "))
		}
		return true, ""
	})
}

// newestGeneration says what the newest generation of inst says of
// newestGeneration is what the newest Generation of inst reports.
func newestGeneration(t testing.TB, inst string) string {
	return testutil.NewestGeneration(generations(t, inst))
}

// oldGenerationsGone: every generation of inst on node is proven gone.
func oldGenerationsGone(t testing.TB, inst, node string) (bool, string) {
	for _, g := range generations(t, inst) {
		if g.Spec.NodeName == node && !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			return false, fmt.Sprintf("%s generation %d on %s: %s", inst, g.Spec.Number, node, testutil.Conditions(g.Status.Conditions))
		}
	}
	return true, ""
}

// claimsFollow waits until the host claim of every Instance named is on
// its node: a moved Instance's agent watches only its own node's claims,
// so the cluster side moves the claim after its holder.
func claimsFollow(t *testing.T, names []string) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("the host claims of %d moved Instances on their new nodes", len(names)), time.Minute, 500*time.Millisecond, func() (bool, string) {
		for _, n := range names {
			inst := getInstance(t, n)
			claim := &v1.HostClaim{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Name: inst.Spec.Host}, claim); err != nil {
				return false, n + ": " + err.Error()
			}
			if claim.Spec.UID != inst.UID || claim.Spec.NodeName != inst.Spec.NodeName {
				return false, fmt.Sprintf("%s on %s: its claim names %s/%s on %s", n, inst.Spec.NodeName, claim.Spec.Namespace, claim.Spec.Name, claim.Spec.NodeName)
			}
		}
		return true, ""
	})
}
