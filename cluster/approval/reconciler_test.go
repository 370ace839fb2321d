package approval

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

const (
	waitLimit = 30 * time.Second
	pollEvery = 100 * time.Millisecond
	// quiet is how long a test watches that the policy writes nothing.
	quiet = 2 * time.Second
)

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

func node(name string, l map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func enrollment(t *testing.T, name string) *v1.Enrollment {
	t.Helper()
	var enr v1.Enrollment
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &enr); err != nil {
		t.Fatal(err)
	}
	return &enr
}

func patch(t *testing.T, obj client.Object, edit func()) {
	t.Helper()
	p := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	edit()
	if err := k8s.Patch(context.Background(), obj, p); err != nil {
		t.Fatal(err)
	}
}

func expectApproved(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, name+" approved", waitLimit, pollEvery, func() (bool, string) {
		enr := enrollment(t, name)
		return enr.Spec.Approved && enr.Annotations[AnnotationApprovedBy] == testSelector,
			fmt.Sprintf("approved %v, annotations %v", enr.Spec.Approved, enr.Annotations)
	})
}

// expectNotApproved watches name's Enrollment stay unapproved for quiet.
func expectNotApproved(t *testing.T, name string) {
	t.Helper()
	for end := time.Now().Add(quiet); time.Now().Before(end); time.Sleep(pollEvery) {
		if enr := enrollment(t, name); enr.Spec.Approved {
			t.Fatalf("%s was approved: annotations %v", name, enr.Annotations)
		}
	}
}

// eventsOf is the reason and note of the Events on Enrollment name.
func eventsOf(t *testing.T, name string) []string {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Enrollment" && e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// TestPolicyApprovesMatchingNodes: an Enrollment made before its Node is
// approved once the Node appears with the pool's label, with an Event
// naming the policy and its selector; one of a Node of another pool is
// not, until its Node is labelled into the pool.
func TestPolicyApprovesMatchingNodes(t *testing.T) {
	create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}})
	create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "batch-1"}})
	expectNotApproved(t, "web-1") // no Node yet

	create(t, node("web-1", map[string]string{poolKey: "web"}))
	batch := node("batch-1", map[string]string{poolKey: "batch", "pool": "web"})
	create(t, batch)
	expectApproved(t, "web-1")
	want := ReasonApprovedByPolicy + ": approved by the cluster side's policy --approve-nodes=" + testSelector + ": Node web-1 matches"
	testutil.Eventually(t, "web-1's Event", waitLimit, pollEvery, func() (bool, string) {
		got := eventsOf(t, "web-1")
		return len(got) == 1 && got[0] == want, strings.Join(got, "; ")
	})
	expectNotApproved(t, "batch-1")

	patch(t, batch, func() { batch.Labels[poolKey] = "web" })
	expectApproved(t, "batch-1")
}

// TestPolicyLeavesAWithdrawalStanding: the policy approves once; an
// administrator's withdrawal is not undone (it never un-approves
// either), and an Enrollment an administrator approved is not written.
func TestPolicyLeavesAWithdrawalStanding(t *testing.T) {
	create(t, node("web-2", map[string]string{poolKey: "web"}))
	enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}}
	create(t, enr)
	expectApproved(t, "web-2")

	enr = enrollment(t, "web-2")
	patch(t, enr, func() { enr.Spec.Approved = false })
	expectNotApproved(t, "web-2")

	create(t, node("web-3", map[string]string{poolKey: "web"}))
	create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "web-3"}, Spec: v1.EnrollmentSpec{Approved: true}})
	time.Sleep(quiet)
	if got := enrollment(t, "web-3"); got.Annotations[AnnotationApprovedBy] != "" || len(eventsOf(t, "web-3")) != 0 {
		t.Errorf("an approved Enrollment was written: annotations %v, events %v", got.Annotations, eventsOf(t, "web-3"))
	}
}
