package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestActivatedSwapsWithoutLoss: the same naive app, handed its socket by
// the agent (LISTEN_FDS), swapped three times under four clients: none of
// ≥ 10,000 requests fails, each old generation drained by proof.
func TestActivatedSwapsWithoutLoss(t *testing.T) {
	a := startAgent(t, "e2e-activated")
	inst := testutil.NewInstance("activated", a.Node, testutil.NaiveApp(python(t)),
		func(i *v1.Instance) { i.Spec.SocketActivation = &v1.SocketActivation{} })
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	inst = waitServing(t, inst.Name, 1)
	pid := getGeneration(t, inst.Name, 1).Status.MainPID
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LISTEN_FDS=1", fmt.Sprintf("LISTEN_PID=%d", pid), "LISTEN_FDNAMES=app"} {
		if !strings.Contains(string(env), want+"\x00") {
			t.Errorf("the app's environment lacks %s", want)
		}
	}
	addr := startNginx(t, inst.Status.Socket)
	kube.SwapsUnderLoad(t, inst.Name, addr, 4, 10000, 3)
}

// TestIdleInstanceWakesOnDemand: an activated Instance with idleAfter
// sleeps once no connection came for that long (Ready=True/Idle, nothing
// running), and the next connection starts a generation that answers it.
// Its wait is printed beside the app's own start, measured the same way.
func TestIdleInstanceWakesOnDemand(t *testing.T) {
	a := startAgent(t, "e2e-idle")
	inst := testutil.NewInstance("sleepy", a.Node, testutil.NaiveApp(python(t)), func(i *v1.Instance) {
		i.Spec.SocketActivation = &v1.SocketActivation{IdleAfter: &metav1.Duration{Duration: 2 * time.Second}}
	})
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	inst = waitServing(t, inst.Name, 1)
	sock := inst.Status.Socket
	own := ownStart(t, python(t))
	for round := 1; round <= 3; round++ {
		var last *v1.Instance
		testutil.Eventually(t, fmt.Sprintf("asleep (round %d)", round), time.Minute, pollEvery, func() (bool, string) {
			last = getInstance(t, inst.Name)
			return last.Status.IdleSince != nil && last.Status.ActiveGeneration == 0 &&
				conditionIs(last, v1.ConditionReady, "True/Idle"), conditions(last.Status.Conditions)
		})
		// Asleep means asleep: no generation starts without a connection.
		time.Sleep(3 * time.Second)
		if again := getInstance(t, inst.Name); again.Status.IdleSince == nil {
			t.Fatalf("round %d: woke with no connection: %s", round, conditions(again.Status.Conditions))
		}
		began := time.Now()
		body, err := unixGet(sock, "/")
		waited := time.Since(began)
		if err != nil || !strings.HasPrefix(body, "naive generation") {
			t.Fatalf("round %d: the first request after sleeping: %q, %v", round, body, err)
		}
		fmt.Printf("wake on demand, round %d: first request answered in %s; the app's own start (exec to first answer) %s; extra %s\n",
			round, waited.Round(time.Millisecond), own.Round(time.Millisecond), (waited - own).Round(time.Millisecond))
		testutil.Eventually(t, "serving again", time.Minute, pollEvery, func() (bool, string) {
			last = getInstance(t, inst.Name)
			return last.Status.ActiveGeneration != 0 && last.Status.IdleSince == nil && last.Status.WokenAt == nil,
				conditions(last.Status.Conditions)
		})
	}
}

func conditionIs(i *v1.Instance, typ, want string) bool {
	for _, c := range i.Status.Conditions {
		if c.Type == typ {
			return string(c.Status)+"/"+c.Reason == want
		}
	}
	return false
}

// ownStart is how long the naive app takes on this machine from exec to
// its first answer, with nothing of unitlet in the way: the floor a wake
// is compared with.
func ownStart(t *testing.T, python string) time.Duration {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "app.sock")
	best := time.Duration(0)
	for i := 0; i < 3; i++ {
		os.Remove(sock)
		cmd := exec.Command(python, "-c", testutil.NaiveAppSource)
		cmd.Env = []string{"UNITLET_APP_SOCKET=" + sock}
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := unixGet(sock, "/"); err == nil {
				break
			}
			if time.Since(began) > 30*time.Second {
				t.Fatal("the naive app did not answer within 30s")
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(began)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if best == 0 || took < best {
			best = took
		}
	}
	return best
}
