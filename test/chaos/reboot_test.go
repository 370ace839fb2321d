package chaos

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// Two boot IDs the test hands the agent in turn through --boot-id-file.
const (
	bootBefore = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
	bootAfter  = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
)

// TestReboot: the direct backend's node rebooted, as far as a test can
// reboot one. A simulated reboot is not a reboot: it kills nothing. So
// the test does what the reboot would, first: every process of the node
// killed and its cgroups and run root (a tmpfs) swept, its state root
// kept; then a new agent starts with the node's boot ID changed under
// that state root. Every Generation recorded before must read
// Terminated=True/NodeRebooted (never KillUnproven, never a start that
// may have run), each Instance served again by a new generation numbered
// on, with its data dir and uid kept. The control comes first: an agent
// killed and started again with the boot ID unchanged never takes a
// generation for gone; it re-adopts the same processes.
func TestReboot(t *testing.T) {
	bootFile := filepath.Join(t.TempDir(), "boot_id")
	setBootID(t, bootFile, bootBefore)
	a, m := openScenario(t, "reboot", "chaos-reboot", map[string]desired{
		"boot-o": {strategy: v1.StrategyOverlap, salt: 1}, "boot-r": {strategy: v1.StrategyReplace, salt: 1},
	}, func(a *agentproc.Agent) { a.Args = append(a.Args, "--boot-id-file", bootFile) })

	before := servingPIDs(t, m)
	crash(t, a, 0)
	m.waitSettled(t)
	checkSettled(t, a, m)
	for name, pid := range before {
		tally.checked(2)
		if now := servingPIDs(t, m)[name]; now != pid {
			tally.broke(t, restart, "%s served by pid %d before a restart in the same boot, %d after", name, pid, now)
		}
		if said := conditionsOfAll(t, name); containsReboot(t, name) {
			tally.broke(t, lie, "%s reads NodeRebooted after a restart in the same boot: %s", name, said)
		}
	}

	// A swap due as the node goes down: it is cut wherever it was.
	applyAll(t, m, map[string]desired{"boot-o": {strategy: v1.StrategyOverlap, salt: 2}})
	time.Sleep(300 * time.Millisecond)
	a.Stop(syscall.SIGKILL)
	old := snapshotBoot(t, a, m)
	a.Sweep(t) // what the reboot would have done: nothing of the old boot runs
	tally.fault("node reboot (processes killed, run root swept, boot ID changed)")
	setBootID(t, bootFile, bootAfter)
	a.Start(t)
	a.WaitReady(t, 60*time.Second)
	waitReportedAnew(t, old)
	m.waitSettled(t)
	checkSettled(t, a, m)
	checkRebooted(t, a, old)
	deleteAll(t, m)
	checkSettled(t, a, m)
}

func setBootID(t *testing.T, path, id string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// containsReboot: a Generation of Instance name says NodeRebooted.
func containsReboot(t *testing.T, name string) bool {
	gens, err := generationsOf(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		for _, c := range g.Status.Conditions {
			if c.Reason == v1.ReasonNodeRebooted {
				return true
			}
		}
	}
	return false
}

// bootSnapshot is what the old boot left: per Instance, its generations
// not proven gone then, its newest generation's number, and its data
// dir's owner.
type bootSnapshot map[string]struct {
	live   []int64
	newest int64
	uid    uint32
}

func snapshotBoot(t *testing.T, a *agentproc.Agent, m *model) bootSnapshot {
	t.Helper()
	out := bootSnapshot{}
	for _, name := range m.names() {
		gens, err := generationsOf(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		s := out[name]
		for _, g := range gens {
			s.newest = max(s.newest, g.Spec.Number)
			if !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
				s.live = append(s.live, g.Spec.Number)
			}
		}
		s.uid = dataOwner(t, a, name)
		out[name] = s
	}
	return out
}

func dataOwner(t *testing.T, a *agentproc.Agent, name string) uint32 {
	t.Helper()
	li, err := a.Layout().Instance(testutil.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(li.DataDir(), &st); err != nil {
		t.Fatalf("%s data dir: %v", name, err)
	}
	return st.Uid
}

// waitReportedAnew waits until every Instance's status names a generation
// the new boot made. The new agent serves first and reports after, so
// until then the API still holds the old boot's status (Ready, its old
// generation active), which would settle the model against the old boot.
// Never getting there is a lie: the status keeps naming a dead process.
func waitReportedAnew(t *testing.T, old bootSnapshot) {
	t.Helper()
	deadline := time.Now().Add(settleLimit)
	for name, s := range old {
		tally.checked(1)
		for {
			active := kube.Instance(t, name).Status.ActiveGeneration
			if active > s.newest {
				break
			}
			if time.Now().After(deadline) {
				tally.broke(t, lie, "%s still reads generation %d active %s after the reboot; the old boot had made up to %d", name, active, settleLimit, s.newest)
				break
			}
			time.Sleep(pollEvery)
		}
	}
}

// checkRebooted holds what the new boot shows against the old boot's.
func checkRebooted(t *testing.T, a *agentproc.Agent, old bootSnapshot) {
	t.Helper()
	for name, s := range old {
		inst := kube.Instance(t, name)
		tally.checked(3 + len(s.live))
		if inst.Status.ActiveGeneration <= s.newest {
			tally.broke(t, lie, "%s is served by generation %d after the reboot; the old boot had made up to %d", name, inst.Status.ActiveGeneration, s.newest)
		}
		for _, typ := range []string{v1.ConditionKillUnproven, v1.ConditionStartUncertain} {
			if meta.IsStatusConditionTrue(inst.Status.Conditions, typ) {
				tally.broke(t, lie, "%s reads %s=True after the reboot", name, typ)
			}
		}
		if uid := dataOwner(t, a, name); uid != s.uid {
			tally.broke(t, lie, "%s's data dir was uid %d's before the reboot, %d's after", name, s.uid, uid)
		}
		for _, n := range s.live {
			g := kube.Generation(t, name, n)
			c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated)
			if c == nil || c.Status != "True" || c.Reason != v1.ReasonNodeRebooted {
				tally.broke(t, lie, "%s generation %d of the old boot reads %s", name, n, testutil.Conditions(g.Status.Conditions))
			}
		}
	}
}
