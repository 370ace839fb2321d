package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// recorder takes a check's failures instead of the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckerSeesLies: the checker is shown status that claims what the
// node does not hold, and a node that holds what no status names; it must
// call each one out (a checker that cannot fail proves nothing).
func TestCheckerSeesLies(t *testing.T) {
	a := startNodeAgent(t, "chaos-self")
	m := newModel(a.Node)
	applyAll(t, m, map[string]desired{"self-r": {strategy: v1.StrategyReplace, salt: 1}})
	m.waitSettled(t)
	g1 := kube.Generation(t, "self-r", 1)

	// A stray process in a generation cgroup no Generation names.
	stray := filepath.Join(pidsHierarchy, genCgroup(a, "self-r", 99))
	if err := os.Mkdir(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("/bin/sleep", "600")
	sleep.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		_ = sleep.Wait()
		_ = os.Remove(stray)
	})
	if err := os.WriteFile(filepath.Join(stray, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	saved := tally
	tally = &report{}
	defer func() { tally = saved }()
	rec := &recorder{TB: t}
	checkSettled(rec, a, m)
	gone := newModel(a.Node)
	gone.set("self-r", desired{strategy: v1.StrategyReplace, deleted: true})
	checkSettled(rec, a, gone)
	for _, lie := range []func(*v1.Generation){
		func(g *v1.Generation) { setCond(g, v1.ConditionTerminated, metav1.ConditionTrue) },
		func(g *v1.Generation) { setCond(g, v1.ConditionStarted, metav1.ConditionFalse) },
		func(g *v1.Generation) { g.Status.MainPID = 1 },
	} {
		g := g1.DeepCopy()
		lie(g)
		checkGeneration(rec, a, g)
	}
	plantReplaceOrder(t, rec, a, time.Second)               // in order: nothing to say
	plantReplaceOrder(t, rec, a, -time.Second)              // the next started before the old one ended
	want := map[string]int{lie: 3, orphan: 3, duplicate: 2} // the stray process is found by both node checks
	for kind, n := range want {
		if got := len(tally.broken[kind]); got != n {
			t.Errorf("%s found: %d, want %d: %q", kind, got, n, tally.broken[kind])
		}
	}
	if len(rec.errs) != 8 {
		t.Errorf("the checker failed its test %d times, want 8: %q", len(rec.errs), rec.errs)
	}
}

func setCond(g *v1.Generation, typ string, st metav1.ConditionStatus) {
	meta.SetStatusCondition(&g.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: "Planted", Message: "planted by the test"})
}

// plantReplaceOrder writes the records of two generations no Generation
// names (7 and 8, so the agent looks at neither): 7's app ended by its
// shim, 8's start handed off gap later; checks them as Replace; and
// removes them.
func plantReplaceOrder(t *testing.T, rec *recorder, a *agentproc.Agent, gap time.Duration) {
	t.Helper()
	li := instanceLayout(t, a, "self-r")
	p7, err := li.Generation(7)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := li.Generation(8)
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	exit, start := record.Name(p7, record.ExitSuffix), record.Name(p8, record.StartSuffix)
	if err := record.Write(li.ExitDir(), exit, record.Exit{Schema: record.Schema, Result: record.ResultSignal, Signal: 15, At: ended, By: "shim"}); err != nil {
		t.Fatal(err)
	}
	if err := record.Write(li.ExitDir(), start, record.Start{Schema: record.Schema, At: ended.Add(gap)}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.Remove(filepath.Join(li.ExitDir(), exit))
		_ = os.Remove(filepath.Join(li.ExitDir(), start))
	}()
	gens := []v1.Generation{{Spec: v1.GenerationSpec{Number: 8}}, {Spec: v1.GenerationSpec{Number: 7}}}
	if n := checkReplaceOrder(rec, a, "self-r", gens); n != 1 {
		t.Errorf("the Replace order was compared %d times, want once", n)
	}
}
