package controllers

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// createGrant creates an administrator's UserGrant, deleted when the test
// ends.
func createGrant(t *testing.T, name, user string, namespaces, nodes []string) *v1.UserGrant {
	t.Helper()
	g := &v1.UserGrant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.UserGrantSpec{User: user, Namespaces: namespaces, Nodes: nodes}}
	create(t, g)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), g) })
	return g
}

// A user no grant gives the namespace on this node, or one the node
// refuses whatever the grant, starts nothing and says how to fix it; a
// refusal for want of a grant says nothing of the node's accounts. With
// the user left empty, the Instance starts as its own uid.
func TestRefusedUserStartsNothing(t *testing.T) {
	tests := map[string]struct {
		user     string
		metadata bool              // the template asks for the cloud metadata service
		grant    *v1.UserGrantSpec // created before the Instance
		reason   string
		hints    []string
	}{
		"metadata service own uid": {metadata: true, reason: v1.ReasonMetadataNotGranted,
			hints: []string{"cloudMetadata: true", "node's cloud credentials"}},
		"metadata service grant without it": {user: "app", metadata: true, reason: v1.ReasonMetadataNotGranted,
			grant: &v1.UserGrantSpec{Namespaces: []string{"default"}}, hints: []string{`user "app" to namespace default`}},
		"root without a grant": {user: "root", reason: v1.ReasonUserNotGranted,
			hints: []string{"namespace default on node " + testNode, `"kind":"UserGrant"`, `"user":"root","namespaces":["default"],"nodes":["` + testNode + `"]`}},
		"a user granted to another namespace only": {user: "app", reason: v1.ReasonUserNotGranted,
			grant: &v1.UserGrantSpec{Namespaces: []string{"other"}}, hints: []string{"not granted to namespace default"}},
		"a user granted on another node only": {user: "app", reason: v1.ReasonUserNotGranted,
			grant: &v1.UserGrantSpec{Namespaces: []string{"default"}, Nodes: []string{"node-other"}}, hints: []string{"on node " + testNode}},
		"uid 0 granted under another name": {user: "toor", reason: v1.ReasonRootNotAllowed,
			grant: &v1.UserGrantSpec{Namespaces: []string{"default"}}, hints: []string{"only a UserGrant of the user root"}},
		"an account no grant gives": {user: "wheel", reason: v1.ReasonUserNeverGranted,
			grant: &v1.UserGrantSpec{Namespaces: []string{"default"}}, hints: []string{"whatever its UserGrant says", "gid 0"}},
		"a granted user the node lacks": {user: "ghost", reason: v1.ReasonUnknownUser,
			grant: &v1.UserGrantSpec{Namespaces: []string{"default"}}, hints: []string{"create it there"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := "user-" + strings.ReplaceAll(strings.ToLower(name), " ", "-")
			inst = inst[:min(len(inst), 40)]
			if tc.grant != nil {
				createGrant(t, inst, tc.user, tc.grant.Namespaces, tc.grant.Nodes)
			}
			create(t, instance(inst, func(i *v1.Instance) {
				i.Spec.Template.User = tc.user
				if tc.metadata {
					i.Spec.Template.Network = &v1.Network{CloudMetadata: v1.CloudMetadataAllow}
				}
			}))
			got := waitInstance(t, inst, v1.ConditionStalled, "True/"+tc.reason)
			msg := ""
			for _, c := range got.Status.Conditions {
				if c.Type == v1.ConditionStalled {
					msg = c.Message
				}
			}
			for _, h := range tc.hints {
				if !strings.Contains(msg, h) {
					t.Errorf("Stalled message %q does not say %q", msg, h)
				}
			}
			if tc.reason == v1.ReasonUserNotGranted && strings.Contains(msg, "exist") {
				t.Errorf("a refusal for want of a grant speaks of the account: %q", msg)
			}
			if g := getGeneration(t, inst, 1); g != nil {
				t.Errorf("generation 1 was made")
			}
			for _, c := range fake.Calls(inst) {
				if strings.HasPrefix(c, "start ") {
					t.Errorf("the runtime was asked to start something: %s", c)
				}
			}
			updateInstance(t, inst, func(i *v1.Instance) { i.Spec.Template.User, i.Spec.Template.Network = "", nil })
			waitInstance(t, inst, v1.ConditionReady, "True/Reconciled")
		})
	}
}

// A grant added wakes the Instances it names at once (not at the next
// recheck); removed, what runs keeps running, as a kubelet keeps a
// running pod, but nothing new starts until it is granted again.
func TestGrantAddedAndRemoved(t *testing.T) {
	const inst = "granted-app"
	create(t, instance(inst, func(i *v1.Instance) { i.Spec.Template.User = "app" }))
	waitInstance(t, inst, v1.ConditionStalled, "True/"+v1.ReasonUserNotGranted)
	g := createGrant(t, inst, "app", []string{"default"}, []string{testNode})
	// Well inside identityRecheck: only the watch can have woken it.
	testutil.Eventually(t, inst+" Ready after the grant", identityRecheck/2, pollEvery, func() (bool, string) {
		i := getInstance(t, inst)
		return condition(i.Status.Conditions, v1.ConditionReady) == "True/Reconciled", conditionsOf(i.Status.Conditions)
	})

	if err := k8s.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitInstance(t, inst, v1.ConditionStalled, "True/"+v1.ReasonUserNotGranted)
	updateInstance(t, inst, func(i *v1.Instance) {
		i.Spec.Template.Env = append(i.Spec.Template.Env, v1.EnvVar{Name: "NEW", Value: "1"})
	})
	testutil.Eventually(t, "the change observed, still refused", waitLimit, pollEvery, func() (bool, string) {
		i := getInstance(t, inst)
		return i.Status.ObservedGeneration == i.Generation &&
			condition(i.Status.Conditions, v1.ConditionStalled) == "True/"+v1.ReasonUserNotGranted, conditionsOf(i.Status.Conditions)
	})
	if getGeneration(t, inst, 2) != nil {
		t.Errorf("generation 2 was made without a grant")
	}
	if g1 := getGeneration(t, inst, 1); g1 == nil || g1.Spec.Retired {
		t.Errorf("generation 1 was retired when its grant went: %+v", g1)
	}
	for _, c := range fake.Calls(inst) {
		if strings.HasPrefix(c, "retire ") || strings.HasPrefix(c, "remove ") {
			t.Errorf("what ran was stopped when its grant went: %s", c)
		}
	}

	createGrant(t, inst+"-again", "app", []string{"default"}, nil)
	testutil.Eventually(t, "generation 2 once granted again", waitLimit, pollEvery, func() (bool, string) {
		g2 := getGeneration(t, inst, 2)
		return g2 != nil && ready(g2), "not ready"
	})
}

// A Generation naming this node for an Instance placed on another (what
// an agent's credentials could create: admission checks only the
// Generation's own node) is never started.
func TestGenerationOfAnotherNodesInstanceNeverStarts(t *testing.T) {
	other := instance("placed-elsewhere")
	other.Spec.NodeName = "node-other"
	create(t, other)
	g := &v1.Generation{
		ObjectMeta: metav1.ObjectMeta{Name: generationName("placed-elsewhere", 1), Namespace: "default",
			Labels: map[string]string{v1.LabelInstance: "placed-elsewhere"}},
		Spec: v1.GenerationSpec{Instance: "placed-elsewhere", NodeName: testNode, Number: 1, Template: other.Spec.Template},
	}
	create(t, g)
	testutil.Eventually(t, "Started=False/LaunchRefused", waitLimit, pollEvery, func() (bool, string) {
		got := getGeneration(t, "placed-elsewhere", 1)
		if got == nil {
			return false, "not found"
		}
		c := condition(got.Status.Conditions, v1.ConditionStarted)
		return c == "False/"+v1.ReasonLaunchRefused, c
	})
	for _, c := range fake.Calls("placed-elsewhere") {
		if strings.HasPrefix(c, "start ") {
			t.Errorf("started: %s", c)
		}
	}
}
