package approval

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

const poolKey = "node-restriction.kubernetes.io/unitlet-pool"

func TestApproves(t *testing.T) {
	now := metav1.Now()
	sel, err := labels.Parse(poolKey + "=web")
	if err != nil {
		t.Fatal(err)
	}
	node := func(l map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: l}}
	}
	matching := node(map[string]string{poolKey: "web"})
	tests := map[string]struct {
		sel  labels.Selector
		enr  v1.Enrollment
		node *metav1.PartialObjectMetadata
		want bool
	}{
		"a new Enrollment of a matching Node": {sel: sel, node: matching, want: true},
		"the policy is off":                   {sel: nil, node: matching},
		"no Node yet":                         {sel: sel, node: nil},
		"a Node of another pool":              {sel: sel, node: node(map[string]string{poolKey: "batch"})},
		"a Node without the label":            {sel: sel, node: node(nil)},
		"a Node going":                        {sel: sel, node: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: matching.Labels, DeletionTimestamp: &now}}},
		"already approved: no write":          {sel: sel, node: matching, enr: v1.Enrollment{Spec: v1.EnrollmentSpec{Approved: true}}},
		"an Enrollment going":                 {sel: sel, node: matching, enr: v1.Enrollment{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}},
		"withdrawn after the policy approved it: the administrator's word stands": {sel: sel, node: matching,
			enr: v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationApprovedBy: sel.String()}}}},
		"other annotations do not matter": {sel: sel, node: matching, want: true,
			enr: v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"example.com/x": "y"}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			enr := tc.enr
			enr.Name = "n1"
			if got := Approves(tc.sel, &enr, tc.node); got != tc.want {
				t.Errorf("Approves = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	warn := func(key string) string {
		return `--approve-nodes: label key "` + key + `" is not under node-restriction.kubernetes.io/: a kubelet may set it on its own Node, ` +
			"and so approve its node; label the nodes with a node-restriction.kubernetes.io/ key instead"
	}
	tests := map[string]struct {
		in       string
		wantSel  string // "" when off
		warnings []string
		wantErr  bool
	}{
		"empty: off":                     {in: ""},
		"blank: off":                     {in: "  "},
		"a restricted key":               {in: poolKey + "=web", wantSel: poolKey + "=web"},
		"a subdomain of the namespace":   {in: "example.node-restriction.kubernetes.io/pool", wantSel: "example.node-restriction.kubernetes.io/pool"},
		"a key a kubelet sets: warned":   {in: "pool=web", wantSel: "pool=web", warnings: []string{warn("pool")}},
		"a look-alike namespace: warned": {in: "evilnode-restriction.kubernetes.io/p", wantSel: "evilnode-restriction.kubernetes.io/p", warnings: []string{warn("evilnode-restriction.kubernetes.io/p")}},
		"one warning per loose key": {in: poolKey + "=web,node.kubernetes.io/instance-type in (a,b)",
			wantSel: poolKey + "=web,node.kubernetes.io/instance-type in (a,b)", warnings: []string{warn("node.kubernetes.io/instance-type")}},
		"not a selector": {in: "pool in (a", wantErr: true},
		"an invalid key": {in: "a b=c", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sel, warnings, err := Parse(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			got := ""
			if sel != nil {
				got = sel.String()
			}
			if diff := cmp.Diff(tc.wantSel, got); diff != "" {
				t.Errorf("selector (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}
