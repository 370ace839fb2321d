package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/cluster"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
)

// massSize is how many Instances the mass swap updates at once.
const massSize = 20

// massLabel marks the mass swap's Instances.
const massLabel = "unitlet.test/mass"

// evictMidSwap: `kubectl delete pod` of the agent while an Overlap swap of
// shop runs under load through the front end. The kubelet stops the agent
// (SIGTERM), the DaemonSet makes a new pod, and its agent finishes the
// swap: no request fails, no app restarts, the status tells the truth.
func evictMidSwap(t *testing.T) {
	shop := kube.Instance(t, "shop")
	old := shop.Status.ActiveGeneration
	steady := servingGenerations(t, "ledger")
	c.VM.Front(t, shop.Status.Socket, "unitlet", frontPort)
	load := startWindowLoad(t, 4, 0)
	load.open()
	kube.UpdateInstance(t, "shop", time.Minute, func(i *v1.Instance) {
		i.Spec.Template.Env[0].Value = fmt.Sprintf("shop-v%d.example.com", old+1)
	})
	eventually(t, fmt.Sprintf("generation %d of shop made", old+1), time.Minute, func() (bool, string) {
		g := &v1.Generation{}
		err := k8s.Get(context.Background(), generationKey("shop", old+1), g)
		return err == nil, fmt.Sprint(err)
	})
	pod := agentPod(t).Name
	kubectl(t, "delete", "pod", "-n", "unitlet-system", pod, "--wait=false")
	fmt.Printf("test/cluster: agent pod %s deleted %s into the swap\n", pod, time.Since(load.opened).Round(100*time.Millisecond))
	if n := len(notServing([]string{"shop"}, old+1)); n != 1 {
		t.Fatalf("shop already served generation %d when its agent was deleted: not a swap in progress", old+1)
	}
	settleAfterAgentChange(t, pod, []string{"shop"}, old, 5*time.Minute)
	load.close()
	load.finish(t, "evict: agent pod deleted mid-swap of shop")
	sameProcesses(t, steady)
}

// massRollout: a DaemonSet rollout (a template annotation, as `kubectl
// rollout restart` makes) while massSize Overlap Instances, all updated
// at once, swap under load spread over all of them.
func massRollout(t *testing.T) {
	ctx := context.Background()
	steady := append(servingGenerations(t, "shop"), servingGenerations(t, "ledger")...)
	names, created := make([]string, massSize), time.Now()
	for n := range names {
		names[n] = fmt.Sprintf("mass-%02d", n)
		if err := k8s.Create(ctx, massInstance(t, names[n])); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, fmt.Sprintf("%d Instances serving generation 1", massSize), 6*time.Minute, func() (bool, string) {
		not := notServing(names, 1)
		return len(not) == 0, fmt.Sprintf("%d not serving: %s", len(not), notServingWhy(not, 1))
	})
	testutil.Report("test/cluster", fmt.Sprintf("%d new Instances serving generation 1 %s after their create",
		massSize, time.Since(created).Round(time.Second)))
	sockets := make([]string, len(names))
	for n, name := range names {
		sockets[n] = kube.Instance(t, name).Status.Socket
	}
	c.VM.FrontAll(t, sockets, "unitlet", frontPort)
	// Paced: back to back, 8 clients through QEMU's network and the
	// guest's nginx take every cycle the two emulated CPUs have, and the
	// swaps starve. About 10 a second is load on every swap without
	// starving it.
	load := startWindowLoad(t, 8, 800*time.Millisecond)
	load.open()
	for _, name := range names {
		kube.UpdateInstance(t, name, time.Minute, func(i *v1.Instance) {
			tinyapp.Serves(i.Name+"-v2", massDrain)(i)
			// The tiny app starts at once: a slow start keeps every swap
			// in progress while the agent pod is replaced.
			i.Spec.Template.Env = append(i.Spec.Template.Env, v1.EnvVar{Name: "START_DELAY_SECONDS", Value: "30"})
		})
	}
	eventually(t, "a generation 2 made", time.Minute, func() (bool, string) {
		g := &v1.Generation{}
		err := k8s.Get(ctx, generationKey(names[0], 2), g)
		return err == nil, fmt.Sprint(err)
	})
	pod := agentPod(t).Name
	kubectl(t, "rollout", "restart", "-n", "unitlet-system", "ds/unitlet-agent")
	pending := len(notServing(names, 2))
	fmt.Printf("test/cluster: rollout restart %s into the swap, %d of %d Instances not yet serving generation 2\n",
		time.Since(load.opened).Round(100*time.Millisecond), pending, massSize)
	if pending == 0 {
		t.Fatal("every Instance served generation 2 before the rollout: not a swap in progress")
	}
	settleAfterAgentChange(t, pod, names, 1, 8*time.Minute)
	load.close()
	load.finish(t, fmt.Sprintf("rollout: DaemonSet rolled during a swap of %d Instances", massSize))
	sameProcesses(t, steady)
	kubectl(t, "delete", "inst", "-l", massLabel, "--timeout=4m")
	leftOnNode(t, names[0])
}

// massDrain is how long a mass Instance's old generation keeps serving
// after its SIGTERM (the Overlap sample's drain).
const massDrain = 3

// massInstance is a tiny Overlap Instance that drains on SIGTERM, its
// name in its answers: the tiny static app, so twenty start at once in
// seconds where the sample's interpreter took minutes.
func massInstance(t testing.TB, name string) *v1.Instance {
	i := testutil.Sample(t, "hosting_v1alpha1_instance_overlap.yaml", cluster.NodeName)
	i.Name, i.Spec.Host, i.Labels = name, name+".example.com", map[string]string{massLabel: "true"}
	tinyapp.Serves(name, massDrain)(i)
	i.Spec.Template.Tier = v1.Tier{Memory: resource.MustParse("48Mi"), CPU: resource.MustParse("250m"), Pids: 64}
	// A generation given up as not ready is replaced by the next number,
	// which this step would misread as a swap that did not happen: room
	// for generation 2's slow start on two emulated CPUs.
	i.Spec.Template.Readiness.TimeoutSeconds = 240
	i.Spec.Overlap = &v1.Overlap{Memory: ptr.To(resource.MustParse("96Mi"))}
	return i
}

// settleAfterAgentChange waits until the agent pod that replaced oldPod
// is Ready and every Instance of names settled on generation from+1,
// watching that generation's invocation all along (it starts once), then
// checks that the node agrees with the status.
func settleAfterAgentChange(t *testing.T, oldPod string, names []string, from int64, limit time.Duration) {
	t.Helper()
	seen := map[string]map[string]bool{} // generation → invocation IDs seen
	started, shown := time.Now(), time.Now()
	eventually(t, "a new agent pod Ready and every swap settled", limit, func() (bool, string) {
		if state := newAgentReady(oldPod); state != "" {
			return false, state
		}
		gens, err := generationsOf(names)
		if err != nil {
			return false, err.Error()
		}
		for _, byNumber := range gens {
			if g := byNumber[from+1]; g != nil && g.Status.InvocationID != "" {
				if seen[g.Name] == nil {
					seen[g.Name] = map[string]bool{}
				}
				seen[g.Name][g.Status.InvocationID] = true
			}
		}
		var first string
		left := 0
		for _, name := range names {
			if why := unsettled(name, from, gens[name]); why != "" {
				first, left = cmp.Or(first, why), left+1
			}
		}
		if left > 0 && time.Since(shown) > 30*time.Second {
			// A slow settle shows its course, not only its last word.
			shown = time.Now()
			fmt.Printf("test/cluster: %s after the agent change, %d of %d not settled; %s\n",
				time.Since(started).Round(time.Second), left, len(names), first)
		}
		return left == 0, first
	})
	testutil.Report("test/cluster", fmt.Sprintf("new agent Ready and %d swaps settled %s after the agent change", len(names), time.Since(started).Round(100*time.Millisecond)))
	printSwapTimes(t, names, from, started)
	for g, ids := range seen {
		if len(ids) != 1 {
			t.Errorf("%s started %d times: invocations %v", g, len(ids), ids)
		}
	}
	gens, err := generationsOf(names)
	if err != nil {
		t.Fatal(err)
	}
	var all []*v1.Generation
	for _, name := range names {
		old := gens[name][from]
		if c := meta.FindStatusCondition(old.Status.Conditions, v1.ConditionDrained); c == nil || c.Status != "True" || c.Reason != v1.ReasonDrainProven {
			t.Errorf("%s stopped without a proven drain: %s", old.Name, testutil.Conditions(old.Status.Conditions))
		}
		all = append(all, old, gens[name][from+1])
	}
	nodeAgrees(t, all)
}

// newAgentReady is "" once the DaemonSet's one pod is another than
// oldPod and Ready, else what it is.
func newAgentReady(oldPod string) string {
	pods, err := agentPods()
	if err != nil || len(pods) != 1 {
		return fmt.Sprint(len(pods), " agent pods ", err)
	}
	p := pods[0]
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Name != oldPod {
			return ""
		}
	}
	return "agent pod " + p.Name + ": " + podState(&p)
}

// unsettled is "" once the Instance name serves generation from+1 and
// the status says nothing abnormal: from proven gone, no later
// generation, nothing uncertain or unproven; else what is not so.
func unsettled(name string, from int64, gens map[int64]*v1.Generation) string {
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst); err != nil {
		return err.Error()
	}
	conds := testutil.Conditions(inst.Status.Conditions)
	if inst.Status.ActiveGeneration != from+1 || !meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady) {
		// Why a swap waits or gave up is in the new generation's own
		// conditions.
		next := "none yet"
		if g := gens[from+1]; g != nil {
			next = fmt.Sprintf("%s %s", g.Status.Phase, testutil.Conditions(g.Status.Conditions))
		}
		return fmt.Sprintf("%s: active %d, %s; generation %d: %s", name, inst.Status.ActiveGeneration, conds, from+1, next)
	}
	if abnormal(inst.Status.Conditions) {
		return name + ": " + conds
	}
	for n, g := range gens {
		switch {
		case n > from+1:
			return fmt.Sprintf("%s: a generation %d beyond the swap's", name, n)
		case abnormal(g.Status.Conditions):
			return g.Name + ": " + testutil.Conditions(g.Status.Conditions)
		case n == from && !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated):
			return g.Name + " not proven gone: " + testutil.Conditions(g.Status.Conditions)
		}
	}
	if gens[from] == nil || gens[from+1] == nil {
		return fmt.Sprintf("%s: generations %d and %d not both there", name, from, from+1)
	}
	return ""
}

// abnormal: StartUncertain or KillUnproven holds.
func abnormal(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, v1.ConditionStartUncertain) || meta.IsStatusConditionTrue(conds, v1.ConditionKillUnproven)
}

// generationsOf reads the Generations of names, by Instance and number.
func generationsOf(names []string) (map[string]map[int64]*v1.Generation, error) {
	var list v1.GenerationList
	if err := k8s.List(context.Background(), &list, client.InNamespace(testutil.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[int64]*v1.Generation{}
	for _, name := range names {
		out[name] = map[int64]*v1.Generation{}
	}
	for i := range list.Items {
		g := &list.Items[i]
		if byNumber, ok := out[g.Spec.Instance]; ok {
			byNumber[g.Spec.Number] = g
		}
	}
	return out, nil
}

// notServing is the Instances of names not serving generation n.
func notServing(names []string, n int64) []string {
	var not []string
	for _, name := range names {
		inst := &v1.Instance{}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst)
		if err != nil || inst.Status.ActiveGeneration != n || !meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady) {
			not = append(not, name)
		}
	}
	return not
}

// notServingWhy says, for each Instance of names, its conditions and
// key, generation n's phase and conditions, and what generation n and the
// one after it were made of (a successor no edit asked for shows there).
func notServingWhy(names []string, n int64) string {
	var why []string
	for _, name := range names {
		inst, g, next := &v1.Instance{}, &v1.Generation{}, &v1.Generation{}
		_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst)
		_ = k8s.Get(context.Background(), generationKey(name, n), g)
		_ = k8s.Get(context.Background(), generationKey(name, n+1), next)
		why = append(why, fmt.Sprintf("%s: active %d, key %s, %s; generation %d %s %s (made of %s); generation %d made of %s",
			name, inst.Status.ActiveGeneration, inst.Status.KeyFingerprint, testutil.Conditions(inst.Status.Conditions),
			n, g.Status.Phase, testutil.Conditions(g.Status.Conditions), madeOf(g), n+1, madeOf(next)))
	}
	return strings.Join(why, "; ")
}

// madeOf is what decides whether g is outdated: its template hash, host
// and key, and when it was made; and why it was retired, if it was (a
// generation given up as not ready in time reads Exited).
func madeOf(g *v1.Generation) string {
	if g.Name == "" {
		return "nothing (none)"
	}
	return fmt.Sprintf("hash %s, host %s, key %s, at %s, retired because %q", g.Annotations["hosting.unitlet.dev/template-hash"],
		g.Spec.Host, g.Spec.KeyFingerprint, g.CreationTimestamp.Format(time.TimeOnly), g.Annotations[v1.AnnotationRetiredBecause])
}

// nodeAgrees checks each Generation's unit in the guest against its
// status, with one systemctl call: one Terminated is not active, any
// other runs the invocation and main pid its status names.
func nodeAgrees(t *testing.T, gens []*v1.Generation) {
	t.Helper()
	units := make([]string, len(gens))
	for i, g := range gens {
		// Quoted: an escaped name (mass\x2d00) read by the shell loses
		// its backslash, and systemctl shows another unit.
		units[i] = "'" + g.Status.Unit + "'"
	}
	out := c.VM.MustRun(t, "systemctl show -p Id,ActiveState,InvocationID,MainPID "+strings.Join(units, " "))
	shown := map[string]map[string]string{}
	for _, block := range strings.Split(out, "\n\n") {
		props := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			k, v, _ := strings.Cut(line, "=")
			props[k] = v
		}
		shown[props["Id"]] = props
	}
	for _, g := range gens {
		u := shown[g.Status.Unit]
		if meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			if u["ActiveState"] == "active" {
				t.Errorf("%s reads Terminated while its unit %s is active: %v", g.Name, g.Status.Unit, u)
			}
			continue
		}
		if u["ActiveState"] != "active" || u["InvocationID"] != g.Status.InvocationID || u["MainPID"] != fmt.Sprint(g.Status.MainPID) {
			t.Errorf("%s reads invocation %s pid %d; its unit %s: %v", g.Name, g.Status.InvocationID, g.Status.MainPID, g.Status.Unit, u)
		}
	}
}

// servingGenerations is the Instance name's serving Generation, to
// compare after a fault with sameProcesses.
func servingGenerations(t testing.TB, name string) []*v1.Generation {
	t.Helper()
	return []*v1.Generation{kube.Generation(t, name, kube.Instance(t, name).Status.ActiveGeneration)}
}

// sameProcesses fails t when a Generation of before now reads another
// main pid or invocation: its app was restarted.
func sameProcesses(t *testing.T, before []*v1.Generation) {
	t.Helper()
	for _, g := range before {
		now := kube.Generation(t, g.Spec.Instance, g.Spec.Number)
		if now.Status.MainPID != g.Status.MainPID || now.Status.InvocationID != g.Status.InvocationID {
			t.Errorf("%s restarted: pid %d invocation %s, was %d %s", g.Name, now.Status.MainPID, now.Status.InvocationID, g.Status.MainPID, g.Status.InvocationID)
		}
	}
	nodeAgrees(t, before)
}

func generationKey(inst string, n int64) client.ObjectKey {
	return client.ObjectKey{Namespace: testutil.Namespace, Name: fmt.Sprintf("%s-g%d", inst, n)}
}

// windowLoad is load through the front end counted in three parts:
// before a window opens, during it (a swap with its fault), after it.
type windowLoad struct {
	load   *testutil.Load
	edges  []testutil.Tally
	opened time.Time
	length time.Duration
}

// startWindowLoad sends requests to the front end from workers clients,
// each waiting pause after each answer, for two seconds before it
// returns: load on the serving generations first.
func startWindowLoad(t *testing.T, workers int, pause time.Duration) *windowLoad {
	w := &windowLoad{load: testutil.StartPacedLoad(fmt.Sprintf("127.0.0.1:%d", c.VM.HostPort(frontPort)), workers, pause, 0, 15*time.Minute)}
	t.Cleanup(w.load.Stop)
	time.Sleep(2 * time.Second)
	return w
}

func (w *windowLoad) open() { w.edges, w.opened = append(w.edges, w.load.Tally()), time.Now() }
func (w *windowLoad) close() {
	w.edges, w.length = append(w.edges, w.load.Tally()), time.Since(w.opened)
}

// finish goes on two seconds after the window, stops, prints the three
// parts and fails t on any failed request, or a window nothing was sent
// in.
func (w *windowLoad) finish(t *testing.T, what string) {
	t.Helper()
	time.Sleep(2 * time.Second)
	w.load.Stop()
	all := w.load.Tally()
	parts := []testutil.Tally{w.edges[0], w.edges[1].Since(w.edges[0]), all.Since(w.edges[1])}
	fmt.Printf("test/cluster: %s\n  before: %s\n  during (%s): %s\n  after: %s\n", what,
		summary(parts[0]), w.length.Round(100*time.Millisecond), summary(parts[1]), summary(parts[2]))
	if all.Failed != 0 {
		t.Errorf("%d of %d requests failed; first: %v", all.Failed, all.Total(), w.load.FirstErr())
	}
	if parts[1].OK == 0 {
		t.Error("no request answered during the window")
	}
}

// summary is a tally with its answers counted by the generation they
// name ("... generation N").
func summary(t testutil.Tally) string {
	by := map[string]int64{}
	for body, n := range t.Bodies {
		_, gen, _ := strings.Cut(body, " generation ")
		by["generation "+strings.TrimSpace(gen)] += n
	}
	return fmt.Sprintf("%d requests, %d failed, answered by %v", t.Total(), t.Failed, by)
}

// printSwapTimes prints when, after since, the swaps of names from
// generation from reached each step (the fastest, the median and the
// slowest): where a slow settle spent its time. Conditions keep seconds.
func printSwapTimes(t *testing.T, names []string, from int64, since time.Time) {
	gens, err := generationsOf(names)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		next bool
		cond string
	}{
		{"the new generation Started", true, v1.ConditionStarted},
		{"the new generation Ready", true, v1.ConditionReady},
		{"the old generation Drained", false, v1.ConditionDrained},
		{"the old generation Terminated", false, v1.ConditionTerminated},
	}
	for _, s := range steps {
		var at []time.Duration
		for _, name := range names {
			g := gens[name][from]
			if s.next {
				g = gens[name][from+1]
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, s.cond); c != nil && c.Status == metav1.ConditionTrue {
				at = append(at, c.LastTransitionTime.Sub(since).Round(time.Second))
			}
		}
		if len(at) == 0 {
			fmt.Printf("test/cluster:   %s: none\n", s.what)
			continue
		}
		slices.Sort(at)
		fmt.Printf("test/cluster:   %s: %d, after %s / %s / %s (first, median, last)\n", s.what, len(at), at[0], at[len(at)/2], at[len(at)-1])
	}
}
