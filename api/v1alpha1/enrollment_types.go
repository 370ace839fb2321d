package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode is the agent's hosting mode.
// +kubebuilder:validation:Enum=Joining;Hosting
type Mode string

const (
	// ModeJoining hosts nothing; readiness answers 503.
	ModeJoining Mode = "Joining"
	// ModeHosting runs the node's Instances.
	ModeHosting Mode = "Hosting"
)

// EnrollmentSpec is the administrator's side of a node's enrollment.
type EnrollmentSpec struct {
	// Approved lets the node host once its guard is armed, like a CSR
	// approval.
	// +optional
	Approved bool `json:"approved,omitempty"`

	// Unschedulable keeps the placement controller from binding or moving
	// Instances to the node (`kubectl cordon` for Enrollments); what runs
	// there keeps running until drained.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// Resource names of an Enrollment's capacity: corev1's memory and cpu,
// and pids (tasks), the three a tier limits.
const ResourcePids corev1.ResourceName = "pids"

// GuardCheck is one precondition for hosting and its last result.
type GuardCheck struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Passed is the check's result.
	Passed bool `json:"passed"`
	// Message says what was found, most of all when it failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// EnrollmentStatus is the node's identity record, written by its agent.
type EnrollmentStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	MachineID string `json:"machineID,omitempty"`
	// +optional
	BootID string `json:"bootID,omitempty"`
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// Platform is GOOS-GOARCH.
	// +optional
	Platform string `json:"platform,omitempty"`
	// +optional
	Kernel string `json:"kernel,omitempty"`
	// CgroupMode is v1, hybrid or v2.
	// +optional
	CgroupMode string `json:"cgroupMode,omitempty"`
	// +optional
	UnitBackend string `json:"unitBackend,omitempty"`
	// Mode is Joining until approved and armed, then Hosting.
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// Endpoint is where the node's agent serves Instance logs and runs to
	// `kubectl unitlet`, and the certificate it serves with.
	// +optional
	Endpoint *AgentEndpoint `json:"endpoint,omitempty"`
	// Capacity is the node's whole: memory, cpu and pids as the agent
	// reads them from the machine.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is what Instances may take: Capacity minus the
	// administrator's reserve (the agent's --reserved) and the requests of
	// the pods bound to the node.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Allocated is what the node's Instances' tiers take now: each
	// running or starting generation's tier, an Overlap swap's raise
	// counted while it lasts.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Checks are the guard's checks with their results.
	// +optional
	// +listType=map
	// +listMapKey=name
	Checks []GuardCheck `json:"checks,omitempty"`
	// Conditions: GuardArmed, Enrolled, Hosting, and NodeLease where the
	// agent keeps a node Lease.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentEndpoint is the agent's own HTTPS endpoint. Its certificate is
// self-signed, made anew at each start and published here: a caller that
// reads this status from the API server trusts the agent that wrote it.
type AgentEndpoint struct {
	// Address is host:port, the node's address as the agent was told it.
	// +kubebuilder:validation:MinLength=1
	Address string `json:"address"`
	// ServerName is the name the certificate is issued for: verify the
	// certificate against it, whatever address is dialled.
	// +kubebuilder:validation:MinLength=1
	ServerName string `json:"serverName"`
	// CABundle is the PEM certificate the serving certificate chains to.
	CABundle []byte `json:"caBundle"`
}

// Enrollment is a node's identity record and its right to host, named
// after the node.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=enr,categories=unitlet
// +kubebuilder:printcolumn:name="Approved",type=boolean,JSONPath=`.spec.approved`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Cordoned",type=boolean,JSONPath=`.spec.unschedulable`
// +kubebuilder:printcolumn:name="Mem Used",type=string,JSONPath=`.status.allocated.memory`
// +kubebuilder:printcolumn:name="Mem Allocatable",type=string,JSONPath=`.status.allocatable.memory`
// +kubebuilder:printcolumn:name="CPU Used",type=string,JSONPath=`.status.allocated.cpu`,priority=1
// +kubebuilder:printcolumn:name="CPU Allocatable",type=string,JSONPath=`.status.allocatable.cpu`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Enrollment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EnrollmentSpec   `json:"spec,omitempty"`
	Status EnrollmentStatus `json:"status,omitempty"`
}

// EnrollmentList is a list of Enrollments.
// +kubebuilder:object:root=true
type EnrollmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Enrollment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Enrollment{}, &EnrollmentList{})
}
