package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Strategy is how a new Generation takes over from the old one.
// +kubebuilder:validation:Enum=Overlap;Replace
type Strategy string

const (
	// StrategyOverlap starts the successor beside the old generation and
	// flips the stable socket once it is ready: zero downtime.
	StrategyOverlap Strategy = "Overlap"
	// StrategyReplace stops the old generation and proves it gone before
	// the successor starts: never two writers.
	StrategyReplace Strategy = "Replace"
)

// InstanceSpec is a hosted app as its owner wants it.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.nodeName) || (has(self.nodeName) && (self.nodeName == oldSelf.nodeName || (has(self.placement) && self.placement.moves == 'Allowed')))",message="nodeName cannot be cleared once set, and changes only when placement.moves is Allowed (a move)"
// +kubebuilder:validation:XValidation:rule="!has(self.overlap) || !has(self.overlap.memory) || quantity(string(self.overlap.memory)).compareTo(quantity(string(self.template.tier.memory))) >= 0",message="overlap.memory must be at least template.tier.memory"
type InstanceSpec struct {
	// Host is the name the app is served under; a DNS-1123 subdomain,
	// held by one Instance in the cluster (its HostClaim): another that
	// names it starts nothing of it (Stalled, HostInUse).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="host must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Host string `json:"host"`

	// NodeName is the node the Instance's new generations run on. Left
	// empty, the placement controller binds it once to a node that fits
	// (Scheduled); set at creation, it pins the Instance there. Only the
	// placement controller changes it after, and only to move an Instance
	// whose placement.moves is Allowed; status.nodeName says where the
	// serving generation runs.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// Placement is how the cluster chooses and changes the node.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// Suspend true retires every generation (scale to zero); the
	// Instance's directories are kept.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Strategy is how generations are swapped.
	// +optional
	// +kubebuilder:default=Overlap
	Strategy Strategy `json:"strategy,omitempty"`

	// DrainLimitSeconds bounds the drain after a swap: the old generation
	// is asked to stop only once the kernel shows its listener drained
	// (nothing queued, no connection it accepted still open), or after
	// this long. 0 stops it at the flip.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainLimitSeconds *int32 `json:"drainLimitSeconds,omitempty"`

	// SocketActivation, when set, has the agent bind the Instance's
	// listening socket and hand it to each generation as fd 3 (the
	// sd_listen_fds protocol: LISTEN_FDS=1, LISTEN_PID, LISTEN_FDNAMES=app),
	// so connections wait in its queue, never refused, while no generation
	// runs (a restart, a Replace swap, a wake). UNITLET_APP_SOCKET stays
	// in the env, bound already. It applies from the next generation.
	// +optional
	SocketActivation *SocketActivation `json:"socketActivation,omitempty"`

	// Template is what runs; any change makes a new Generation.
	Template Template `json:"template"`

	// Overlap is the parent limit while two generations run side by side
	// (default: twice the tier).
	// +optional
	Overlap *Overlap `json:"overlap,omitempty"`

	// GenerationHistoryLimit is how many retired Generations, proven
	// gone, are kept for their record (exit, timings); older ones are
	// deleted. The active and the newest Generation are always kept.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	GenerationHistoryLimit *int32 `json:"generationHistoryLimit,omitempty"`
}

// MovePolicy says whether the cluster may move an Instance to another
// node.
// +kubebuilder:validation:Enum=Never;Allowed
type MovePolicy string

const (
	// MovesNever keeps the Instance on its node for life: its data dir
	// lives there. A drain lists it; a lost node leaves it NodeLost.
	MovesNever MovePolicy = "Never"
	// MovesAllowed lets a drain or a lost node move it: the next
	// generation starts on another node (a fresh data dir) and the old
	// one is drained and stopped once the new one serves.
	MovesAllowed MovePolicy = "Allowed"
)

// DefaultLostAfterSeconds is placement.lostAfterSeconds' default.
const DefaultLostAfterSeconds = 300

// Placement constrains where the placement controller binds and moves
// the Instance.
type Placement struct {
	// NodeSelector must match the labels of the node's Enrollment.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Moves: Never (the default) or Allowed.
	// +optional
	// +kubebuilder:default=Never
	Moves MovePolicy `json:"moves,omitempty"`

	// LostAfterSeconds is how long after its node is declared lost an
	// Instance whose moves are Allowed is moved to another node.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	LostAfterSeconds *int32 `json:"lostAfterSeconds,omitempty"`
}

// MovesAllowed says whether the Instance may be moved off its node.
func (s *InstanceSpec) MovesAllowed() bool {
	return s.Placement != nil && s.Placement.Moves == MovesAllowed
}

// SocketActivation is how the agent holds an Instance's socket.
type SocketActivation struct {
	// IdleAfter, when set, stops every generation once no connection has
	// reached the socket for this long (Ready=True, reason Idle); the next
	// connection starts one (reason Waking until it is ready) and is
	// answered by it.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="idleAfter must be at least 1s"
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
}

// Overlap is the Instance-wide limit during an Overlap swap.
type Overlap struct {
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// InstanceStatus is what the node agent knows of the Instance. The agent's
// reconcile steps write ActiveGeneration, IdleSince, WokenAt and Socket
// where what they record happens (a promotion, a sleep, a wake);
// ObservedGeneration and Conditions are computed once at the end of each
// reconcile from the Generations and what the steps noted.
type InstanceStatus struct {
	// ObservedGeneration is the metadata.generation last reconciled
	// successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ActiveGeneration is the Generation that gets new connections. Set
	// when a generation is promoted; 0 once every generation is proven
	// gone for a suspend or a sleep.
	// +optional
	ActiveGeneration int64 `json:"activeGeneration,omitempty"`

	// IdleSince is set while the Instance sleeps (socketActivation.idleAfter):
	// no generation runs and the agent holds its socket. Cleared when a
	// connection wakes it or it is suspended.
	// +optional
	IdleSince *metav1.Time `json:"idleSince,omitempty"`

	// WokenAt is when a connection woke the sleeping Instance; it is
	// cleared once a generation serves again, or when it is suspended.
	// +optional
	WokenAt *metav1.Time `json:"wokenAt,omitempty"`

	// Socket is the stable path of the app's socket on its node, as the
	// node reports it (and as a promotion returns it).
	// +optional
	Socket string `json:"socket,omitempty"`

	// KeyFingerprint identifies the Instance's key (its SHA-256, hex),
	// written by the cluster side when it mints or rotates the key; the
	// key itself is never in the Instance.
	// +optional
	KeyFingerprint string `json:"keyFingerprint,omitempty"`

	// NodeName is the node the serving generation runs on, written with
	// each promotion: a front end routes Host to Socket on this node.
	// During a move it stays the old node until the new one serves.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, StartUncertain,
	// KillUnproven, and Scheduled (the placement controller's).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Instance is a hosted app: a host name, a command, its environment and a
// resource tier, run on one node.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:resource:shortName=inst,categories=unitlet
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.host`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`,description="the node new generations run on (bound or pinned)"
// +kubebuilder:printcolumn:name="Serving",type=string,JSONPath=`.status.nodeName`,description="the node the serving generation runs on"
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeGeneration`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Instance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InstanceSpec   `json:"spec"`
	Status InstanceStatus `json:"status,omitempty"`
}

// InstanceList is a list of Instances.
// +kubebuilder:object:root=true
type InstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Instance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Instance{}, &InstanceList{})
}
