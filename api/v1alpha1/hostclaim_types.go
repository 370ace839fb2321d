package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// HostClaimSpec names the Instance that holds a host. Its holder never
// changes: a claim passes to another holder only by being deleted (with a
// precondition on its UID) and created anew. Its node follows the
// holder's moves (the cluster side), so an agent needs to watch only its
// own node's claims.
type HostClaimSpec struct {
	// Namespace is the holding Instance's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a HostClaim's holder is immutable: delete the claim to release the host"
	Namespace string `json:"namespace"`

	// Name is the holding Instance's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a HostClaim's holder is immutable: delete the claim to release the host"
	Name string `json:"name"`

	// UID is the holding Instance's UID: an Instance re-created under the
	// same name is another holder.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a HostClaim's holder is immutable: delete the claim to release the host"
	UID types.UID `json:"uid"`

	// NodeName is the holding Instance's node: only that node's agent may
	// create or delete the claim (config/policy). When the holder moves,
	// the cluster side sets it to the holder's new node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
}

// HostClaim is one host's owner in the cluster, named after the host (a
// DNS-1123 subdomain, like every object name). The API server refuses a
// second object of one name, so two Instances never hold one host: the
// first to create the claim keeps it until its holder is gone (its
// finalizer let go once every unit of it was proven gone). The cluster
// side then deletes the claim, unless an Instance on the holder's node
// took it over first.
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:resource:scope=Cluster,shortName=hc,categories=unitlet
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostClaimSpec `json:"spec"`
}

// HostClaimList is a list of HostClaims.
// +kubebuilder:object:root=true
type HostClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HostClaim{}, &HostClaimList{})
}
