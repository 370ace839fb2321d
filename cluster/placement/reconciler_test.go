package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

const (
	waitLimit = 20 * time.Second
	pollEvery = 100 * time.Millisecond
)

func wantScheduled(t *testing.T, name, want string) {
	t.Helper()
	testutil.Eventually(t, name+": "+want, waitLimit, pollEvery, func() (bool, string) {
		got := scheduled(t, name)
		return got == want, got
	})
}

// eventsOf is the reason and note of the Events on Instance name.
func eventsOf(t *testing.T, name string) []string {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

func wantEvent(t *testing.T, name, want string) {
	t.Helper()
	testutil.Eventually(t, name+"'s Event "+want, waitLimit, pollEvery, func() (bool, string) {
		got := eventsOf(t, name)
		for _, e := range got {
			if e == want {
				return true, ""
			}
		}
		return false, strings.Join(got, "; ")
	})
}

// An unplaced Instance is bound once to the node that fits, with an Event
// and Scheduled=True/Bound; one naming its node is Pinned there, cordon or
// not; one no node takes is Unschedulable with the kube-scheduler's
// message, and bound as soon as an Enrollment that takes it comes.
func TestBindPinUnschedulable(t *testing.T) {
	enroll(t, "bind-a", res("4Gi", "4", 4000), time.Now(), nil)
	enroll(t, "bind-b", res("4Gi", "4", 4000), time.Now(), func(e *v1.Enrollment) { e.Spec.Unschedulable = true })

	create(t, newInstance("web", "", nil))
	wantScheduled(t, "web", "bind-a True/Bound: bound to node bind-a")
	wantEvent(t, "web", "Scheduled: Successfully assigned default/web to bind-a")

	create(t, newInstance("pinned", "bind-b", nil))
	wantScheduled(t, "pinned", "bind-b True/Pinned: pinned to node bind-b by its spec")
	// Placed, a new Instance reads as in progress until its agent writes.
	for name, want := range map[string]string{
		"web":    "True/Progressing: bound to node bind-a; waiting for the node's agent to start the app",
		"pinned": "True/Progressing: pinned to node bind-b by its spec; waiting for the node's agent to start the app",
	} {
		c := meta.FindStatusCondition(get(t, name).Status.Conditions, v1.ConditionReconciling)
		if got := fmt.Sprint(c); c == nil || string(c.Status)+"/"+c.Reason+": "+c.Message != want {
			t.Errorf("%s: Reconciling %s, want %s", name, got, want)
		}
	}

	create(t, newInstance("picky", "", func(i *v1.Instance) {
		i.Spec.Placement = &v1.Placement{NodeSelector: map[string]string{"zone": "z"}}
	}))
	const msg = "0/2 nodes are available: 1 node is cordoned, 1 node didn't match the node selector."
	wantScheduled(t, "picky", " False/Unschedulable: "+msg)
	wantEvent(t, "picky", "FailedScheduling: "+msg)

	enroll(t, "bind-c", res("4Gi", "4", 4000), time.Now(), func(e *v1.Enrollment) { e.Labels = map[string]string{"zone": "z"} })
	wantScheduled(t, "picky", "bind-c True/Bound: bound to node bind-c")
}

// A node with room for two tiers takes two of three Instances created at
// once: what is bound there counts against its allocatable (the ledger's
// part, a binding the cache does not show yet, is TestLedgerBoundByNode's).
func TestBindCountsEachBinding(t *testing.T) {
	enroll(t, "room-for-two", res("128Mi", "4", 4000), time.Now(), nil)
	for _, n := range []string{"one", "two", "three"} {
		create(t, newInstance(n, "", nil))
	}
	testutil.Eventually(t, "two bound, one unschedulable", waitLimit, pollEvery, func() (bool, string) {
		var got []string
		bound, unschedulable := 0, 0
		for _, n := range []string{"one", "two", "three"} {
			s := scheduled(t, n)
			got = append(got, s)
			switch s {
			case "room-for-two True/Bound: bound to node room-for-two":
				bound++
			case " False/Unschedulable: 0/1 nodes are available: 1 node has insufficient memory.":
				unschedulable++
			}
		}
		return bound == 2 && unschedulable == 1, strings.Join(got, "; ")
	})
}

// Moves: a drained node's Allowed Instance moves (the annotation goes in
// the same write), a Never one stays; an Allowed Instance on a lost node
// moves once lostAfterSeconds passed; one on an unapproved node moves.
func TestMoves(t *testing.T) {
	enroll(t, "move-a", res("4Gi", "4", 4000), time.Now(), nil)
	enroll(t, "move-b", res("4Gi", "4", 4000), time.Now(), nil)
	enroll(t, "move-lost", res("4Gi", "4", 4000), time.Now().Add(-time.Hour), nil)
	allowed := func(lostAfter int32) func(*v1.Instance) {
		return func(i *v1.Instance) {
			i.Spec.Placement = &v1.Placement{Moves: v1.MovesAllowed, LostAfterSeconds: ptr.To(lostAfter)}
		}
	}
	drained := func(i *v1.Instance) { i.Annotations = map[string]string{v1.AnnotationMoveFrom: "move-a"} }

	create(t, newInstance("mover", "move-a", func(i *v1.Instance) { allowed(300)(i); drained(i) }))
	create(t, newInstance("stayer", "move-a", drained))
	wantScheduled(t, "mover", "move-b True/Moving: moving from move-a to move-b: node move-a is being drained")
	wantEvent(t, "mover", "Moving: Moving from move-a to move-b: node move-a is being drained")
	if a := get(t, "mover").Annotations[v1.AnnotationMoveFrom]; a != "" {
		t.Errorf("move-from = %q after the move, want it removed", a)
	}
	wantScheduled(t, "stayer", "move-a True/Pinned: pinned to node move-a by its spec")

	create(t, newInstance("patient", "move-lost", allowed(3600)))
	create(t, newInstance("hasty", "move-lost", allowed(0)))
	testutil.Eventually(t, "hasty moved off the lost node", waitLimit, pollEvery, func() (bool, string) {
		got := scheduled(t, "hasty")
		return strings.HasPrefix(got, "move-a True/Moving: moving from move-lost to move-a: node move-lost is lost since "), got
	})
	wantScheduled(t, "patient", "move-lost True/Pinned: pinned to node move-lost by its spec")

	enr := &v1.Enrollment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "move-a"}, enr); err != nil {
		t.Fatal(err)
	}
	enr.Spec.Approved = false
	if err := k8s.Update(context.Background(), enr); err != nil {
		t.Fatal(err)
	}
	wantScheduled(t, "hasty", "move-b True/Moving: moving from move-a to move-b: node move-a's Enrollment is not approved")
	wantScheduled(t, "stayer", "move-a True/Pinned: pinned to node move-a by its spec")
}
