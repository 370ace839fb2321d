package enrollment

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOwnerReferences(t *testing.T) {
	owner := NodeOwner("n1", "uid-2")
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Pool", Name: "p", UID: "uid-p"}
	otherNode := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n2", UID: "uid-n2"}
	stale := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-1"}
	controller := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-2", Controller: ptr.To(true)}
	tests := map[string]struct {
		refs []metav1.OwnerReference
		want []metav1.OwnerReference
	}{
		"none: the Node is added":              {refs: nil, want: []metav1.OwnerReference{owner}},
		"already owned: unchanged":             {refs: []metav1.OwnerReference{owner}, want: []metav1.OwnerReference{owner}},
		"stale uid of a re-registered Node":    {refs: []metav1.OwnerReference{stale}, want: []metav1.OwnerReference{owner}},
		"other owners kept, in their order":    {refs: []metav1.OwnerReference{other, otherNode}, want: []metav1.OwnerReference{other, otherNode, owner}},
		"replaced in the place of the first":   {refs: []metav1.OwnerReference{other, stale, otherNode}, want: []metav1.OwnerReference{other, owner, otherNode}},
		"duplicates of the Node made one":      {refs: []metav1.OwnerReference{stale, other, owner}, want: []metav1.OwnerReference{owner, other}},
		"a controller reference is made plain": {refs: []metav1.OwnerReference{controller}, want: []metav1.OwnerReference{owner}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := OwnerReferences(tc.refs, "n1", "uid-2")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OwnerReferences (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNodeOwner(t *testing.T) {
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u", BlockOwnerDeletion: ptr.To(false)}
	if diff := cmp.Diff(want, NodeOwner("n1", "u")); diff != "" {
		t.Errorf("NodeOwner (-want,+got):\n%s", diff)
	}
}
