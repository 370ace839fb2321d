package controllers

import (
	"strings"
	"testing"

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
