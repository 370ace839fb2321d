// Package v1alpha1 holds the hosting.unitlet.dev/v1alpha1 API: Instances
// that people apply, the Generations the agent makes of them, and the
// Enrollment that records whether a node may host at all.
// +kubebuilder:object:generate=true
// +groupName=hosting.unitlet.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "hosting.unitlet.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
