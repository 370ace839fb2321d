package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/cgrouphold"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// openScenario records a scenario, starts its node's agent and the
// sampler, and waits until the Instances first asked for are as asked.
func openScenario(t *testing.T, name, node string, first map[string]desired, tune ...func(*agentproc.Agent)) (*agentproc.Agent, *model) {
	t.Helper()
	tally.scenario(name)
	a := startNodeAgent(t, node, tune...)
	m := newModel(a.Node)
	startSampler(t, a, m)
	applyAll(t, m, first)
	m.waitSettled(t)
	return a, m
}

// applyAll asks for d on every named Instance of m, retrying conflicts.
func applyAll(t *testing.T, m *model, ds map[string]desired) {
	t.Helper()
	for name, d := range ds {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return m.apply(context.Background(), name, d) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// servingPIDs maps each Instance of m that serves to its serving app's pid.
func servingPIDs(t *testing.T, m *model) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, name := range m.names() {
		inst := kube.Instance(t, name)
		if n := inst.Status.ActiveGeneration; n > 0 {
			out[name] = kube.Generation(t, name, n).Status.MainPID
		}
	}
	return out
}

// TestAPIOutage: the API server out of reach (the agent's connections
// reset, its port closed) while apps run and a swap is due, the agent
// killed and started again in the middle of it. Nothing the node runs may
// stop or start for it; once the API is back, the swap completes.
func TestAPIOutage(t *testing.T) {
	a, m := openScenario(t, "api-outage", "chaos-outage", map[string]desired{
		"steady-o": {strategy: v1.StrategyOverlap, salt: 1}, "steady-r": {strategy: v1.StrategyReplace, salt: 1},
		"due": {strategy: v1.StrategyReplace, salt: 1},
	})
	before := servingPIDs(t, m)

	applyAll(t, m, map[string]desired{"due": {strategy: v1.StrategyReplace, salt: 2}})
	apiCut.Cut()
	tally.fault("API outage " + outage.String())
	end := time.Now().Add(outage)
	restarted := false
	for time.Now().Before(end) {
		for name, pid := range before {
			tally.checked(1)
			if command(int(pid)) == "" {
				tally.broke(t, restart, "%s's app (pid %d) ended during the API outage", name, pid)
				delete(before, name)
			}
		}
		if !restarted && time.Until(end) < outage/2 {
			a.Stop(syscall.SIGKILL)
			tally.fault("agent SIGKILL")
			a.Start(t) // it cannot reach the API: it must wait, not act
			restarted = true
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := apiCut.Restore(); err != nil {
		t.Fatal(err)
	}
	tally.checked(1)
	if !a.Running() {
		tally.broke(t, restart, "the agent started during the outage exited instead of waiting for the API server:\n%s", a.LogTail(5))
		a.Start(t)
	}
	a.WaitReady(t, 90*time.Second)
	m.waitSettled(t)
	checkSettled(t, a, m)
	after := servingPIDs(t, m)
	for _, name := range []string{"steady-o", "steady-r"} {
		tally.checked(1)
		if before[name] != after[name] {
			tally.broke(t, restart, "%s served by pid %d before the outage, %d after", name, before[name], after[name])
		}
	}
	deleteAll(t, m)
	checkSettled(t, a, m)
}

// TestUnkillable: a process the agent cannot kill in the serving
// generation of one Instance that is swapped (Replace) and of one that is
// deleted. Neither kill may be claimed: KillUnproven shows within 1 s of
// the agent's proof running out, Replace starts nothing new, the deleted
// Instance keeps its finalizer; once the process can die, both finish and
// nothing is left.
func TestUnkillable(t *testing.T) {
	a, m := openScenario(t, "unkillable-kill", "chaos-hold", map[string]desired{"held-swap": {strategy: v1.StrategyReplace, salt: 1}, "held-del": {strategy: v1.StrategyOverlap, salt: 1}})
	holds := map[string]*cgrouphold.Hold{}
	for _, name := range []string{"held-swap", "held-del"} {
		holds[name] = cgrouphold.In(t, genCgroup(a, name, 1), runID+"-"+name)
		tally.fault("unkillable process")
	}
	applyAll(t, m, map[string]desired{"held-swap": {strategy: v1.StrategyReplace, salt: 2}, "held-del": {deleted: true}})

	for _, name := range []string{"held-swap", "held-del"} {
		var seen time.Time
		testutil.Eventually(t, name+" KillUnproven=True", 120*time.Second, pollEvery, func() (bool, string) {
			inst := kube.Instance(t, name)
			seen = time.Now()
			return meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionKillUnproven), testutil.Conditions(inst.Status.Conditions)
		})
		knew := logTime(t, a, "retire unproven", unitOf(t, a, name, 1))
		tally.checked(1)
		if late := seen.Sub(knew); late > time.Second {
			tally.broke(t, lie, "%s: the agent knew its kill unproven at %s, the condition showed %s later", name, knew.Format(time.StampMilli), late)
		} else {
			tally.sawUncertainty(late)
		}
	}
	g1 := kube.Generation(t, "held-del", 1)
	tally.checked(2)
	if meta.IsStatusConditionTrue(g1.Status.Conditions, v1.ConditionTerminated) {
		tally.broke(t, lie, "held-del generation 1 says Terminated=True while a process of it lives")
	}
	if !controllerHolds(g1) || !controllerHolds(kube.Instance(t, "held-del")) {
		tally.broke(t, orphan, "held-del let go of its finalizer with an unproven kill")
	}
	checkGeneration(t, a, g1)

	for _, h := range holds {
		h.Release(t)
	}
	m.waitSettled(t)
	checkSettled(t, a, m)
	deleteAll(t, m)
	checkSettled(t, a, m)
}

func controllerHolds(o client.Object) bool {
	for _, f := range o.GetFinalizers() {
		if f == v1.Finalizer {
			return true
		}
	}
	return false
}

// unitOf is the unit name of generation n of Instance name on a's node.
func unitOf(t *testing.T, a *agentproc.Agent, name string, n int64) string {
	t.Helper()
	li, err := a.Layout().Instance(testutil.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := li.Generation(n)
	if err != nil {
		t.Fatal(err)
	}
	return p.UnitName()
}

// logTime is when a's log first said msg about unit (the agent logs JSON
// with "ts" in RFC 3339 with nanoseconds).
func logTime(t *testing.T, a *agentproc.Agent, msg, unit string) time.Time {
	t.Helper()
	f, err := os.Open(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			TS   time.Time `json:"ts"`
			Msg  string    `json:"msg"`
			Unit string    `json:"unit"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg && line.Unit == unit {
			return line.TS
		}
	}
	t.Fatalf("the agent's log never says %q of %s", msg, unit)
	return time.Time{}
}

// TestFullDisk: the state root on a small tmpfs that fills up while
// launch and env files are to be written (a swap and a new Instance).
// Nothing may claim to run what could not be written; the serving
// generation keeps serving; once space is freed, both go on. An app that
// logs steadily keeps answering while its lines cannot be written: they
// are dropped and counted, the Enrollment says DiskPressure, and once
// space is back its log goes on after what it held.
func TestFullDisk(t *testing.T) {
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=16m,mode=0711"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(disk, syscall.MNT_DETACH) }) // registered first: runs after the agent's
	a, m := openScenario(t, "full-disk", "chaos-disk",
		map[string]desired{"full-swap": {strategy: v1.StrategyOverlap, salt: 1}, "full-logs": {strategy: v1.StrategyOverlap, salt: 1, logging: true}},
		func(a *agentproc.Agent) { a.StateRoot, a.Metrics = disk+"/state", true })
	servedBy := servingPIDs(t, m)["full-swap"]
	testutil.Eventually(t, "full-logs writes its log", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(readLog(t, a, "full-logs"), " line 20\n"), "no line 20 yet"
	})
	logged := readLog(t, a, "full-logs")

	fill := disk + "/fill"
	fillUp(t, fill)
	tally.fault("state root full")
	applyAll(t, m, map[string]desired{"full-swap": {strategy: v1.StrategyOverlap, salt: 2}, "full-new": {strategy: v1.StrategyReplace, salt: 1}})
	// Both must say why they do not go on, and claim nothing meanwhile.
	for _, name := range []string{"full-swap", "full-new"} {
		testutil.Eventually(t, name+" names the full disk", 60*time.Second, pollEvery, func() (bool, string) {
			said := conditionsOfAll(t, name)
			return strings.Contains(said, "no space left on device"), said
		})
	}
	checkSettledNow(t, a, m)
	tally.checked(1)
	if now := servingPIDs(t, m)["full-swap"]; now != servedBy {
		tally.broke(t, restart, "full-swap served by pid %d before the disk filled, %d after", servedBy, now)
	}
	checkLoggingWhileFull(t, a, "full-logs", logged)
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	m.waitSettled(t)
	checkSettled(t, a, m)
	checkLoggingAfterFree(t, a, "full-logs", logged)
	deleteAll(t, m)
	checkSettled(t, a, m)
}

// checkSettledNow runs the checks that hold at any time, on an unsettled
// node: the generations' conditions against their cgroups.
func checkSettledNow(t *testing.T, a *agentproc.Agent, m *model) {
	t.Helper()
	for _, name := range m.names() {
		gens, err := generationsOf(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range gens {
			tally.checked(checkGeneration(t, a, &gens[i]))
		}
	}
}

// conditionsOfAll renders the conditions of Instance name and of each of
// its Generations.
func conditionsOfAll(t *testing.T, name string) string {
	said := "instance: " + testutil.Conditions(kube.Instance(t, name).Status.Conditions)
	gens, _ := generationsOf(context.Background(), name)
	for _, g := range gens {
		said += fmt.Sprintf("; g%d: %s", g.Spec.Number, testutil.Conditions(g.Status.Conditions))
	}
	return said
}

// fillUp writes path until the file system has no space left.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if strings.Contains(err.Error(), "no space left") {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestTwoAgents: a second agent, on another machine (its own machine ID
// and roots), claims the node's name while the first hosts it and is even
// killed and started again. The second hosts nothing: no process, no
// socket, no write to the Enrollment, and it says why.
func TestTwoAgents(t *testing.T) {
	a, m := openScenario(t, "two-agents-one-node", "chaos-twin", map[string]desired{"twin-o": {strategy: v1.StrategyOverlap, salt: 1}, "twin-r": {strategy: v1.StrategyReplace, salt: 1}})
	var enr v1.Enrollment
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: a.Node}, &enr); err != nil {
		t.Fatal(err)
	}
	machine := enr.Status.MachineID

	b := newNodeAgent(t, a.Node, runID+"-twin", func(b *agentproc.Agent) {
		b.Args = append(b.Args, "--host-etc", testutil.HostEtc(t, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"))
	})
	b.Start(t)
	tally.fault("second agent on the node name")
	testutil.Eventually(t, "the second agent says the node is another's", 60*time.Second, pollEvery, func() (bool, string) {
		body, err := get("http://" + b.ProbeAddr + "/hostingz")
		return strings.Contains(body, "claimed by another agent"), fmt.Sprint(body, err)
	})
	applyAll(t, m, map[string]desired{"twin-o": {strategy: v1.StrategyOverlap, salt: 2}, "twin-r": {strategy: v1.StrategyReplace, salt: 2}})
	crash(t, a, 0)
	m.waitSettled(t)
	checkSettled(t, a, m)

	tally.checked(3)
	if pids := pidsUnder(b.CgroupRoot); len(pids) > 0 {
		tally.broke(t, duplicate, "the second agent of node %s runs %v", b.Node, pids)
	}
	if ents, _ := os.ReadDir(b.RunRoot); len(ents) > 0 {
		tally.broke(t, duplicate, "the second agent of node %s made %d entries in its run root", b.Node, len(ents))
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: a.Node}, &enr); err != nil {
		t.Fatal(err)
	}
	if enr.Status.MachineID != machine {
		tally.broke(t, lie, "the Enrollment of %s names machine %q, the hosting agent's is %q", a.Node, enr.Status.MachineID, machine)
	}
	b.Stop(syscall.SIGTERM)
	deleteAll(t, m)
	checkSettled(t, a, m)
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
