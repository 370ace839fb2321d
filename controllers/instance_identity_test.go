package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// A user the node refuses (root without the administrator's word) or
// does not have starts nothing and says how to fix it; once the spec
// names a user the node runs, the Instance starts.
func TestRefusedUserStartsNothing(t *testing.T) {
	tests := map[string]struct {
		user, reason, hint string
	}{
		"root without allowRoot": {"root", v1.ReasonRootNotAllowed, `"allowRoot":true`},
		"a user the node lacks":  {"ghost", v1.ReasonUnknownUser, "create it there"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := "user-" + tc.user
			create(t, instance(inst, func(i *v1.Instance) { i.Spec.Template.User = tc.user }))
			got := waitInstance(t, inst, v1.ConditionStalled, "True/"+tc.reason)
			for _, c := range got.Status.Conditions {
				if c.Type == v1.ConditionStalled && !strings.Contains(c.Message, tc.hint) {
					t.Errorf("Stalled message %q does not say %q", c.Message, tc.hint)
				}
			}
			if g := getGeneration(t, inst, 1); g != nil {
				t.Errorf("generation 1 was made")
			}
			for _, c := range fake.Calls(inst) {
				if strings.HasPrefix(c, "start ") {
					t.Errorf("the runtime was asked to start something: %s", c)
				}
			}
			updateInstance(t, inst, func(i *v1.Instance) { i.Spec.Template.User = "app" })
			waitInstance(t, inst, v1.ConditionReady, "True/Reconciled")
		})
	}
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
	eventually(t, "Started=False/LaunchRefused", func() (bool, string) {
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
