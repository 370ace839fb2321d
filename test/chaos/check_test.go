package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// checkSettled compares, once m is settled, everything the API says about
// a's node with what the node holds.
func checkSettled(t testing.TB, a *agentproc.Agent, m *model) {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, name := range m.names() {
		d, _ := m.get(name)
		if d.deleted {
			n++
			if left := leftovers(a, name); len(left) > 0 {
				tally.broke(t, orphan, "%s deleted, but the node keeps %s", name, strings.Join(left, ", "))
			}
			continue
		}
		n += checkInstance(t, ctx, a, name, d)
	}
	// Whatever the node runs must belong to a Generation that is not
	// proven gone.
	for _, name := range instancesOnNode(a) {
		for g, pids := range populatedGens(a, name) {
			n++
			gen := &v1.Generation{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.Namespace, Name: fmt.Sprintf("%s-g%d", name, g)}, gen)
			if err != nil {
				tally.broke(t, orphan, "%s generation %d runs %v on the node, but its Generation: %v", name, g, pids, err)
			}
		}
	}
	tally.checked(n)
}

// checkInstance checks one Instance that exists and its generations; it
// returns how many checks it made.
func checkInstance(t testing.TB, ctx context.Context, a *agentproc.Agent, name string, d desired) int {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst); err != nil {
		t.Errorf("%s: %v", name, err)
		return 0
	}
	gens, err := generationsOf(ctx, name)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return 0
	}
	n := 0
	for i := range gens {
		n += checkGeneration(t, a, &gens[i])
	}
	live := populatedGens(a, name)
	n++
	if d.strategy == v1.StrategyReplace && len(live) > 1 {
		tally.broke(t, duplicate, "%s (Replace) has %d live generations: %v", name, len(live), live)
	}
	if d.strategy == v1.StrategyReplace {
		n += checkReplaceOrder(t, a, name, gens)
	}
	ready := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return n
	}
	n++
	if ready.Reason == v1.ReasonSuspended {
		if len(live) > 0 {
			tally.broke(t, lie, "%s says %q, but generations %v run", name, ready.Message, live)
		}
		return n
	}
	// Ready and serving generation N: the stable socket answers as N.
	body, err := testutil.UnixGet(inst.Status.Socket, "/")
	if want := fmt.Sprintf("gen %d\n", inst.Status.ActiveGeneration); err != nil || body != want {
		tally.broke(t, lie, "%s says Ready serving generation %d, but %s answers %q, %v", name, inst.Status.ActiveGeneration, inst.Status.Socket, body, err)
	}
	return n
}

// checkReplaceOrder holds Replace's order to the microsecond, where the
// node kept both records: generation n's app was seen to end by its own
// supervisor (the shim's exit record) before n+1's start was handed off
// (its start record, written first). The sampler's 20 ms look at the
// cgroups could miss a shorter overlap; the records cannot. A generation
// whose end no shim saw (killed with the node, or never started) has no
// such record and is not compared.
func checkReplaceOrder(t testing.TB, a *agentproc.Agent, name string, gens []v1.Generation) int {
	t.Helper()
	li := instanceLayout(t, a, name)
	have := map[int64]bool{}
	for _, g := range gens {
		have[g.Spec.Number] = true
	}
	n := 0
	for old := range have {
		next := old + 1
		if !have[next] {
			continue
		}
		exit, err := testutil.ExitRecord(os.ReadFile, li, old)
		if err != nil || exit.By != "shim" {
			continue
		}
		handedOff, err := testutil.HandedOffAt(os.ReadFile, li, next)
		if err != nil {
			continue
		}
		n++
		if !exit.At.Before(handedOff) {
			tally.broke(t, duplicate, "%s (Replace): generation %d's app ended at %s, after generation %d's start was handed off at %s",
				name, old, exit.At.Format(time.RFC3339Nano), next, handedOff.Format(time.RFC3339Nano))
		}
	}
	return n
}

// checkGeneration holds one Generation's conditions against its cgroup.
func checkGeneration(t testing.TB, a *agentproc.Agent, g *v1.Generation) int {
	t.Helper()
	pids := pidsUnder(genCgroup(a, g.Spec.Instance, g.Spec.Number))
	id := fmt.Sprintf("%s generation %d", g.Spec.Instance, g.Spec.Number)
	started := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionStarted)
	terminated := meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated)
	if terminated && len(pids) > 0 {
		tally.broke(t, lie, "%s is Terminated=True, but its cgroup holds %v", id, pids)
	}
	if started != nil && started.Status == metav1.ConditionFalse && len(pids) > 0 {
		tally.broke(t, lie, "%s is Started=False (%s), but its cgroup holds %v", id, started.Message, pids)
	}
	if started != nil && started.Status == metav1.ConditionTrue && started.Reason == v1.ReasonRunning && !terminated &&
		!slices.Contains(pids, int(g.Status.MainPID)) {
		tally.broke(t, lie, "%s says %q, but its cgroup holds %v", id, started.Message, pids)
	}
	if apps := appsOf(pids); len(apps) > 1 {
		tally.broke(t, duplicate, "%s runs the app %d times: %v", id, len(apps), apps)
	}
	return 4
}

// sampler looks at the node and the API all the time a test runs, not only
// when it has settled: a Replace Instance never has two live generations,
// and a Generation that says Terminated=True never has a live process.
type sampler struct {
	a    *agentproc.Agent
	m    *model
	stop chan struct{}
	done sync.WaitGroup
	seen map[string]bool
}

func startSampler(t *testing.T, a *agentproc.Agent, m *model) *sampler {
	s := &sampler{a: a, m: m, stop: make(chan struct{}), seen: map[string]bool{}}
	s.done.Add(1)
	go s.loop(t)
	t.Cleanup(s.end)
	return s
}

func (s *sampler) end() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
}

func (s *sampler) loop(t *testing.T) {
	defer s.done.Done()
	fast := time.NewTicker(20 * time.Millisecond)
	defer fast.Stop()
	for i := 0; ; i++ {
		select {
		case <-s.stop:
			return
		case <-fast.C:
		}
		s.replaceOnce(t)
		if i%10 == 0 {
			s.terminatedOnce(t)
		}
	}
}

func (s *sampler) once(t *testing.T, key, kind, format string, a ...any) {
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	tally.broke(t, kind, format, a...)
}

func (s *sampler) replaceOnce(t *testing.T) {
	n := 0
	for _, name := range s.m.names() {
		d, _ := s.m.get(name)
		if d.strategy != v1.StrategyReplace {
			continue
		}
		n++
		if live := populatedGens(s.a, name); len(live) > 1 {
			s.once(t, fmt.Sprint(name, live), duplicate, "%s (Replace) had %d live generations at once: %v", name, len(live), live)
		}
	}
	tally.checked(n)
}

// terminatedOnce: Terminated=True is final, so a live process in the
// cgroup after it was read is a lie, unless the Generation object was
// replaced meanwhile (a deleted Instance made again reuses the name).
func (s *sampler) terminatedOnce(t *testing.T) {
	ctx := context.Background()
	var gens v1.GenerationList
	if err := k8s.List(ctx, &gens, client.InNamespace(testutil.Namespace)); err != nil {
		return
	}
	n := 0
	for i := range gens.Items {
		g := &gens.Items[i]
		if g.Spec.NodeName != s.a.Node || !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			continue
		}
		n++
		pids := pidsUnder(genCgroup(s.a, g.Spec.Instance, g.Spec.Number))
		if len(pids) == 0 {
			continue
		}
		again := &v1.Generation{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), again); err != nil || again.UID != g.UID {
			continue
		}
		s.once(t, string(g.UID), lie, "%s generation %d was Terminated=True while its cgroup held %v", g.Spec.Instance, g.Spec.Number, pids)
	}
	tally.checked(n)
}
