package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// otherNamespace is the second tenant's namespace of the host tests.
const otherNamespace = "hc-other"

// racer is one Instance of the host tests: its namespace, name and node
// (the suite's when empty).
type racer struct{ ns, name, node string }

func (r racer) key() client.ObjectKey { return client.ObjectKey{Namespace: r.ns, Name: r.name} }

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// startSecondAgent runs another node's reconcilers until the test ends
// (after its Instances are deleted: the cleanups run last-in first-out).
func startSecondAgent(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := startAgent(ctx, node, newFakeRuntime()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
}

func getRacer(t *testing.T, r racer) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), r.key(), inst); err != nil {
		t.Fatalf("get instance %s/%s: %v", r.ns, r.name, err)
	}
	return inst
}

// generationsOf lists the racer's Generations as the API server has them.
func generationsOf(t *testing.T, r racer) []v1.Generation {
	t.Helper()
	var list v1.GenerationList
	if err := k8s.List(context.Background(), &list, client.InNamespace(r.ns), client.MatchingLabels{v1.LabelInstance: r.name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// claimHolder is the namespace/name host's HostClaim names, "" when there
// is none.
func claimHolder(t *testing.T, host string) string {
	t.Helper()
	c, err := getClaim(context.Background(), k8s, host)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		return ""
	}
	return c.Spec.Namespace + "/" + c.Spec.Name
}

// deleteRacers deletes the racers and waits until every one is gone.
func deleteRacers(t *testing.T, racers []racer) {
	t.Helper()
	for _, r := range racers {
		inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}}
		if err := k8s.Delete(context.Background(), inst); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "the racers deleted", waitLimit, pollEvery, func() (bool, string) {
		for _, r := range racers {
			if err := k8s.Get(context.Background(), r.key(), &v1.Instance{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s/%s: %v", r.ns, r.name, err)
			}
		}
		return true, ""
	})
}

// concurrently runs f for every racer at once and fails t on any error.
func concurrently(t *testing.T, racers []racer, f func(racer) error) {
	t.Helper()
	start, errs := make(chan struct{}), make([]error, len(racers))
	var wg sync.WaitGroup
	for i, r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(r)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// hostInUse says whether inst reads Stalled=True/HostInUse, with the
// message's faults: a message naming holder (namespace or name) fails.
func hostInUse(inst *v1.Instance, holder racer) (bool, string) {
	c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1.ReasonHostInUse {
		return false, ""
	}
	for _, leak := range []string{holder.ns, holder.name} {
		if leak != "" && strings.Contains(c.Message, leak) {
			return true, fmt.Sprintf("%s/%s's message %q names the holder's %q", inst.Namespace, inst.Name, c.Message, leak)
		}
	}
	return true, ""
}

// The second Instance with a host already held starts nothing, says why
// without naming the holder, and takes the host over once the holder is
// deleted: its claim is left, and the holder's deletion wakes the second,
// which finds the holder gone (no cluster side runs here).
func TestSecondInstanceWithAHostWaits(t *testing.T) {
	ensureNamespace(t, otherNamespace)
	first, second := racer{ns: "default", name: "host-first"}, racer{ns: otherNamespace, name: "host-second"}
	// A host that does not spell the holder's name, which the message must not.
	const host = "shared-once.example.com"
	create(t, instance(first.name, func(i *v1.Instance) { i.Spec.Host = host }))
	waitInstance(t, first.name, v1.ConditionReady, "True/Reconciled")
	create(t, instance(second.name, func(i *v1.Instance) { i.Namespace, i.Spec.Host = second.ns, host }))
	t.Cleanup(func() { deleteRacers(t, []racer{first, second}) })
	testutil.Eventually(t, "the second reads HostInUse", waitLimit, pollEvery, func() (bool, string) {
		inst := getRacer(t, second)
		stalled, leak := hostInUse(inst, first)
		if leak != "" {
			t.Fatal(leak)
		}
		return stalled, conditionsOf(inst.Status.Conditions)
	})
	if c := condition(getRacer(t, second).Status.Conditions, v1.ConditionReady); c != "False/"+v1.ReasonHostInUse {
		t.Errorf("Ready = %s", c)
	}
	if gens := generationsOf(t, second); len(gens) > 0 {
		t.Fatalf("the second Instance made %d generations", len(gens))
	}
	if got := claimHolder(t, host); got != "default/host-first" {
		t.Fatalf("the claim names %q", got)
	}

	deleteRacers(t, []racer{first})
	testutil.Eventually(t, "the second holds the host once the first is gone", waitLimit, pollEvery, func() (bool, string) {
		inst := getRacer(t, second)
		return claimHolder(t, host) == otherNamespace+"/host-second" &&
			meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady), conditionsOf(inst.Status.Conditions)
	})
}

// A claim whose holder is gone (its finalizer removed by hand, say) is
// taken over on the holder's node; on another node it is not the agent's
// to delete, and an administrator releases it.
func TestStaleClaimIsTakenOverOnItsNode(t *testing.T) {
	for name, tc := range map[string]struct {
		node     string
		takeOver bool
	}{
		"its node":     {node: testNode, takeOver: true},
		"another node": {node: "node-elsewhere", takeOver: false},
	} {
		t.Run(name, func(t *testing.T) {
			host := "stale-" + strings.ReplaceAll(name, " ", "-") + ".example.com"
			stale := claimOf(host, "default", "long-gone", "u-long-gone", tc.node)
			if err := k8s.Create(context.Background(), stale); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), stale) })
			r := racer{ns: "default", name: "stale-" + strings.ReplaceAll(name, " ", "-")}
			create(t, instance(r.name, func(i *v1.Instance) { i.Spec.Host = host }))
			t.Cleanup(func() { deleteRacers(t, []racer{r}) })
			if tc.takeOver {
				waitInstance(t, r.name, v1.ConditionReady, "True/Reconciled")
				if got := claimHolder(t, host); got != "default/"+r.name {
					t.Fatalf("the claim names %q", got)
				}
				return
			}
			waitInstance(t, r.name, v1.ConditionStalled, "True/"+v1.ReasonHostInUse)
			if got := claimHolder(t, host); got != "default/long-gone" {
				t.Fatalf("another node's claim was touched: it names %q", got)
			}
		})
	}
}

// An Instance moved here keeps the claim it made on its former node, which
// this node's cache does not hold until the cluster side moves it here
// (none runs in this suite): the claim is found through the API server,
// and the Instance serves its host with no claim of this node made for it.
func TestMovedInstanceFindsItsClaim(t *testing.T) {
	const from, host = "node-moved-from", "moved-here.example.com"
	r := racer{ns: "default", name: "moved-here"}
	create(t, instance(r.name, func(i *v1.Instance) {
		i.Spec.Host, i.Spec.NodeName, i.Spec.Placement = host, from, &v1.Placement{Moves: v1.MovesAllowed}
	}))
	t.Cleanup(func() { deleteRacers(t, []racer{r}) })
	inst := getRacer(t, r)
	claim := claimOf(host, r.ns, r.name, inst.UID, from)
	claim.Labels = map[string]string{v1.LabelHolderUID: string(inst.UID)}
	if err := k8s.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), claim) })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getRacer(t, r)
		cur.Spec.NodeName = testNode
		return k8s.Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitInstance(t, r.name, v1.ConditionReady, "True/Reconciled")
	got := &v1.HostClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(claim), got); err != nil {
		t.Fatal(err)
	}
	if got.UID != claim.UID || got.Spec != claim.Spec {
		t.Errorf("the moved Instance's claim was replaced: %+v, want %+v", got.Spec, claim.Spec)
	}
}

// The node's cache holds only the node's claims: another node's are
// neither cached nor watched (the cluster's size is the API server's).
func TestNodeCacheHoldsOnlyItsClaims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mine, theirs := claimOf("cache-mine.example.com", "default", "a", "u-a", testNode), claimOf("cache-theirs.example.com", "default", "b", "u-b", "node-cache-other")
	for _, c := range []*v1.HostClaim{mine, theirs} {
		create(t, c)
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), ByObject: NodeCache(testNode)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	var list v1.HostClaimList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cl := range list.Items {
		if strings.HasPrefix(cl.Name, "cache-") {
			got = append(got, cl.Name)
		}
	}
	if diff := cmp.Diff([]string{mine.Name}, got); diff != "" {
		t.Errorf("claims in the node's cache (-want,+got):\n%s", diff)
	}
}
