package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserGrantSpec is an administrator's word that the Instances of some
// namespaces may run as a named user of some nodes. Without one, an
// Instance naming spec.template.user starts nothing (Stalled,
// UserNotGranted); an Instance without a user always runs as a uid of
// its own and needs no grant.
// +kubebuilder:validation:XValidation:rule="!has(self.supplementaryGroups) || !self.supplementaryGroups.exists(g, g == 'root')",message="the group root (gid 0) is never granted"
type UserGrantSpec struct {
	// Namespaces whose Instances may name User.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="each namespace must be a namespace name (a DNS label)"
	Namespaces []string `json:"namespaces"`

	// User is the node's account, as named in its passwd. root is granted
	// like any other user, and only a grant of root runs uid 0. A grant's
	// user does not change: grant another user with another UserGrant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z_][a-z0-9_-]*[$]?$')",message="user must be a valid user name (lowercase letters, digits, '_' and '-')"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="user is immutable: grant another user with another UserGrant"
	User string `json:"user"`

	// Nodes the grant holds on, by name; absent: every node.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="each node must be a node name (a DNS subdomain)"
	Nodes []string `json:"nodes,omitempty"`

	// SupplementaryGroups are the groups of User it keeps beside its
	// primary group; its other groups are dropped. The agent refuses the
	// grant's user outright (Stalled, UserNeverGranted) when one of them,
	// or its uid or primary group, is gid 0 (except root's own primary
	// gid), the socket group or an id of the agent's --app-ids.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z_][a-z0-9_-]*[$]?$')",message="each group must be a valid group name"
	SupplementaryGroups []string `json:"supplementaryGroups,omitempty"`
	// CloudMetadata lets Instances that run as User in these namespaces
	// reach the cloud metadata service when their template asks
	// (spec.template.network.cloudMetadata: Allow): the node's cloud
	// credentials become theirs.
	// +optional
	CloudMetadata bool `json:"cloudMetadata,omitempty"`
}

// UserGrant lets the Instances of the listed namespaces run as a named
// user of the listed nodes. Cluster-scoped: a namespace's owner can
// neither write nor read it; the agents only read it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ug,categories=unitlet
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.spec.nodes`
// +kubebuilder:printcolumn:name="Groups",type=string,JSONPath=`.spec.supplementaryGroups`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type UserGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec UserGrantSpec `json:"spec"`
}

// UserGrantList is a list of UserGrants.
// +kubebuilder:object:root=true
type UserGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UserGrant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&UserGrant{}, &UserGrantList{})
}
