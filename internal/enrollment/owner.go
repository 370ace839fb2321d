package enrollment

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NodeOwner is the owner reference an Enrollment holds to its Node, so
// the garbage collector deletes the Enrollment with the Node. It is no
// controller reference and does not block the Node's deletion (which
// would take the right to update nodes/finalizers).
func NodeOwner(node string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: uid,
		BlockOwnerDeletion: ptr.To(false)}
}

// isNodeRef says whether ref points at a Node named node, whatever its
// uid.
func isNodeRef(ref metav1.OwnerReference, node string) bool {
	return ref.APIVersion == "v1" && ref.Kind == "Node" && ref.Name == node
}

// OwnerReferences are the owners an Enrollment of node should have,
// given the ones it has: every reference to a Node named node is
// replaced by one NodeOwner(node, uid), in the place of the first (a
// re-registered Node has a new uid: the old one's reference would have
// the garbage collector delete the Enrollment of a live node); the
// references to anything else are kept as they are, in order.
func OwnerReferences(refs []metav1.OwnerReference, node string, uid types.UID) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	placed := false
	for _, r := range refs {
		switch {
		case !isNodeRef(r, node):
			out = append(out, r)
		case !placed:
			out = append(out, NodeOwner(node, uid))
			placed = true
		}
	}
	if !placed {
		out = append(out, NodeOwner(node, uid))
	}
	return out
}
