// Package approval is the cluster side's approval policy for autoscaled
// node pools (`unitlet cluster --approve-nodes=<label selector>`): it
// approves the Enrollment of each node whose Node matches the selector,
// as an administrator's `kubectl patch enrollment NODE --type=merge -p
// '{"spec":{"approved":true}}'` would. The agent does the rest (it
// prepares and arms its guard once approved), so spec.approved is all
// the policy writes, with one annotation that records it did.
package approval

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// AnnotationApprovedBy is v1.AnnotationApprovedByPolicy: the policy
// approves an Enrollment once.
const AnnotationApprovedBy = v1.AnnotationApprovedByPolicy

// Parse reads --approve-nodes: nil (the policy is off) for an empty
// value; a selector otherwise, with a warning per key a kubelet may set on
// its own Node (see Warnings).
func Parse(s string) (labels.Selector, []string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, nil, fmt.Errorf("--approve-nodes %q is not a label selector: %w", s, err)
	}
	return sel, Warnings(sel), nil
}

// Warnings name each key of sel outside the node-restriction.kubernetes.io
// label namespace: a kubelet may set most other labels on its own Node
// (--node-labels), so a node could match, and be approved, by its own
// doing. The NodeRestriction admission plugin keeps kubelets from
// setting [*.]node-restriction.kubernetes.io/ keys.
func Warnings(sel labels.Selector) []string {
	reqs, _ := sel.Requirements()
	var out []string
	for _, r := range reqs {
		if restricted(r.Key()) {
			continue
		}
		out = append(out, fmt.Sprintf("--approve-nodes: label key %q is not under %s/: a kubelet may set it on its own Node, "+
			"and so approve its node; label the nodes with a %s/ key instead", r.Key(), corev1.LabelNamespaceNodeRestriction, corev1.LabelNamespaceNodeRestriction))
	}
	return out
}

// restricted says whether a kubelet may not set key on its Node under
// NodeRestriction.
func restricted(key string) bool {
	ns, _, found := strings.Cut(key, "/")
	return found && (ns == corev1.LabelNamespaceNodeRestriction || strings.HasSuffix(ns, "."+corev1.LabelNamespaceNodeRestriction))
}

// Approves says whether the policy approves enr, whose Node is node (nil:
// there is none): the Node (not going) matches sel, and enr is neither approved
// nor going, nor was it approved by the policy before (an administrator
// withdrew that approval). It never withdraws an approval.
func Approves(sel labels.Selector, enr *v1.Enrollment, node *metav1.PartialObjectMetadata) bool {
	switch {
	case sel == nil || node == nil || node.DeletionTimestamp != nil:
		return false
	case enr.Spec.Approved || enr.DeletionTimestamp != nil:
		return false
	case enr.Annotations[AnnotationApprovedBy] != "":
		return false
	}
	return sel.Matches(labels.Set(node.Labels))
}
