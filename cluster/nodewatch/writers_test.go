package nodewatch

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/statuswrite"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestTwoWritersLoseNothing: nodewatch (its reconciler, run by the
// manager, told of each renewal of an expired Lease) and the agent's
// status write (statuswrite.Instance, on a base read from a cache as the
// agent reads) write one Instance's conditions many times at once. No
// version the API server stores holds an older fact of either writer than
// the version before it, and the last holds both writers' last facts.
func TestTwoWritersLoseNothing(t *testing.T) {
	const node, name, rounds = "contended-node", "contended", 60
	ctx := context.Background()
	create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}})
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: node},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(1)),
			RenewTime: &metav1.MicroTime{Time: longAgo}}}
	create(t, lease)
	create(t, instanceOn(name, node))
	testutil.Eventually(t, "NodeLost", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		c := condition(t, name, v1.ConditionReady)
		return c == "Unknown/"+v1.ReasonNodeLost, c
	})

	w, err := watcher.Watch(ctx, &v1.InstanceList{}, client.InNamespace("default"), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		lastRound, lastRenew := 0, time.Time{}
		for ev := range w.ResultChan() {
			inst, ok := ev.Object.(*v1.Instance)
			if !ok {
				continue
			}
			round, renew := agentRound(inst), renewedAt(inst)
			if round < lastRound {
				lost = append(lost, fmt.Sprintf("version %s: the agent's round %d after %d", inst.ResourceVersion, round, lastRound))
			}
			if renew.Before(lastRenew) {
				lost = append(lost, fmt.Sprintf("version %s: nodewatch's renewal %s after %s", inst.ResourceVersion, renew, lastRenew))
			}
			lastRound, lastRenew = max(lastRound, round), maxTime(lastRenew, renew)
		}
	}()

	// Reported also when the wait below fails.
	defer func() {
		w.Stop()
		<-watched
		for _, l := range lost {
			t.Error(l)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- agentWrites(ctx, name, rounds) }()
	go func() { defer wg.Done(); errs <- renewLate(ctx, lease, longAgo, rounds) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	lastRenew := longAgo.Add(rounds * time.Second)
	testutil.Eventually(t, "both writers' last facts", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		inst := &v1.Instance{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
			return false, err.Error()
		}
		round, renew := agentRound(inst), renewedAt(inst)
		return round == rounds && renew.Equal(lastRenew), fmt.Sprintf("agent round %d (want %d), nodewatch renewal %s (want %s)", round, rounds, renew, lastRenew)
	})
}

// agentWrites writes KillUnproven "round i" for i = 1..rounds, each as
// the agent's reconcile would: read, compute, write; a write refused for
// a conflict is a reconcile requeued, which reads again.
func agentWrites(ctx context.Context, name string, rounds int) error {
	for i := 1; i <= rounds; {
		inst := &v1.Instance{}
		if err := cached.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
			return err
		}
		base := inst.DeepCopy()
		meta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{Type: v1.ConditionKillUnproven, Status: metav1.ConditionTrue,
			Reason: v1.ReasonProofTimedOut, Message: fmt.Sprintf("round %d", i)})
		switch err := statuswrite.Instance(ctx, k8s, k8s, inst, base); {
		case err == nil:
			i++
		case !apierrors.IsConflict(err):
			return fmt.Errorf("agent round %d: %w", i, err)
		}
	}
	return nil
}

// renewLate moves the Lease's renewal forward a second at a time, always
// long expired: each is a new NodeLost message for nodewatch to write.
func renewLate(ctx context.Context, lease *coordinationv1.Lease, from time.Time, rounds int) error {
	for j := 1; j <= rounds; j++ {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(lease), l); err != nil {
			return err
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: from.Add(time.Duration(j) * time.Second)}
		if err := k8s.Update(ctx, l); err != nil {
			return fmt.Errorf("lease renewal %d: %w", j, err)
		}
	}
	return nil
}

func agentRound(inst *v1.Instance) int {
	round := 0
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionKillUnproven); c != nil {
		_, _ = fmt.Sscanf(c.Message, "round %d", &round)
	}
	return round
}

var renewedRE = regexp.MustCompile(`last renewed its Lease at (\S+);`)

func renewedAt(inst *v1.Instance) time.Time {
	c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReady)
	if c == nil || c.Reason != v1.ReasonNodeLost {
		return time.Time{}
	}
	m := renewedRE.FindStringSubmatch(c.Message)
	if m == nil {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339, m[1])
	return at
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
