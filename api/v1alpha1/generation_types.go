package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GenerationPhase is where a Generation is in its life.
// +kubebuilder:validation:Enum=Pending;Preparing;Starting;Running;Retiring;Retired;Failed
type GenerationPhase string

const (
	PhasePending   GenerationPhase = "Pending"
	PhasePreparing GenerationPhase = "Preparing"
	PhaseStarting  GenerationPhase = "Starting"
	PhaseRunning   GenerationPhase = "Running"
	PhaseRetiring  GenerationPhase = "Retiring"
	PhaseRetired   GenerationPhase = "Retired"
	PhaseFailed    GenerationPhase = "Failed"
)

// GenerationSpec is one numbered, immutable snapshot of an Instance's
// template. Only Retired may change, and only from false to true: a
// generation being stopped and proven gone is never started again under
// the same name.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.retired) || !oldSelf.retired || (has(self.retired) && self.retired)",message="retired cannot be undone: make a new Generation instead"
type GenerationSpec struct {
	// Instance is the name of the owning Instance.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="instance is immutable"
	Instance string `json:"instance"`

	// NodeName is the owning Instance's node, copied so that an agent's
	// cache can select its own Generations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeName is immutable"
	NodeName string `json:"nodeName"`

	// Number counts an Instance's generations from 1.
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="number must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="number is immutable"
	Number int64 `json:"number"`

	// Host is the Instance's spec.host when this generation was made: the
	// host it serves, held by the Instance's HostClaim. Empty on a
	// generation made before hosts were frozen (it serves the Instance's
	// host).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="host is immutable"
	Host string `json:"host,omitempty"`

	// KeyFingerprint is the Instance key's fingerprint this generation
	// was made with: its start is refused unless the key read then has
	// it. Empty on a generation made before instance keys.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="keyFingerprint is immutable"
	KeyFingerprint string `json:"keyFingerprint,omitempty"`

	// Template is the frozen template this generation runs.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="template is immutable: change the Instance to make a new Generation"
	Template Template `json:"template"`

	// Retired is the desire to stop this generation and prove it gone.
	// +optional
	Retired bool `json:"retired,omitempty"`
}

// ExitStatus is how a generation's main process ended.
type ExitStatus struct {
	// Code is the exit code, when it exited.
	// +optional
	Code *int32 `json:"code,omitempty"`
	// Signal is the signal's name, when it was killed by one.
	// +optional
	Signal string `json:"signal,omitempty"`
	// At is when the exit was recorded.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
}

// GenerationStatus is what the node agent knows of a Generation. All of
// it is written once per reconcile from what the reconcile's steps
// learnt; the steps write none of it themselves.
type GenerationStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase GenerationPhase `json:"phase,omitempty"`
	// Unit is the systemd unit (or direct-backend unit) name.
	// +optional
	Unit string `json:"unit,omitempty"`
	// InvocationID identifies one run of the unit.
	// +optional
	InvocationID string `json:"invocationID,omitempty"`
	// MainPID is the main process as last observed.
	// +optional
	MainPID int64 `json:"mainPID,omitempty"`
	// Cgroup is the generation's cgroup path.
	// +optional
	Cgroup string `json:"cgroup,omitempty"`
	// Exit is the exit record, once there is one.
	// +optional
	Exit *ExitStatus `json:"exit,omitempty"`
	// StartedAt is when the start was observed running.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Conditions: Prepared, Started, Ready, Drained, Terminated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Generation is one numbered run of an Instance's template, owned by it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:resource:shortName=gen,categories=unitlet
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.instance`
// +kubebuilder:printcolumn:name="Number",type=integer,JSONPath=`.spec.number`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Started",type=string,JSONPath=`.status.conditions[?(@.type=="Started")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Generation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GenerationSpec   `json:"spec"`
	Status GenerationStatus `json:"status,omitempty"`
}

// GenerationList is a list of Generations.
// +kubebuilder:object:root=true
type GenerationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Generation `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Generation{}, &GenerationList{})
}
