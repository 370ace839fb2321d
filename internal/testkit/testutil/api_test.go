package testutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSample(t *testing.T) {
	tests := map[string]struct {
		file string
		want string
	}{
		"overlap": {file: "hosting_v1alpha1_instance_overlap.yaml", want: "default/shop on node-a"},
		"replace": {file: "hosting_v1alpha1_instance_replace.yaml", want: "default/ledger on node-a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := Sample(t, tc.file, "node-a")
			got := inst.Namespace + "/" + inst.Name + " on " + inst.Spec.NodeName
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestConditions(t *testing.T) {
	tests := map[string]struct {
		conds []metav1.Condition
		want  string
	}{
		"none": {want: ""},
		"two in order": {
			conds: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Starting", Message: "g1 not ready"},
				{Type: "Suspended", Status: metav1.ConditionTrue, Reason: "Asked"},
			},
			want: "Ready=False/Starting: g1 not ready; Suspended=True/Asked: ",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Conditions(tc.conds)); diff != "" {
				t.Fatalf("(-want,+got):\n%s", diff)
			}
		})
	}
}
