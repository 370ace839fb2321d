package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// Template is what runs for an Instance. Any change to it makes a new
// Generation; a Generation carries a frozen copy.
// +kubebuilder:validation:XValidation:rule="!has(self.workingDir) || self.workingDir.startsWith('/')",message="workingDir must be an absolute path"
type Template struct {
	// Command is the argv prefix; command[0] must be an absolute path.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || self[0].startsWith('/')",message="command[0] must be an absolute path, e.g. /usr/bin/app"
	// +listType=atomic
	Command []string `json:"command"`

	// Args follow the command; $(UNITLET_APP_SOCKET) and other platform
	// variables are expanded by the agent.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env is the instance's own layer of the environment, the lowest one.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Env []EnvVar `json:"env,omitempty"`

	// EnvFrom names Secrets and ConfigMaps whose data form the middle
	// layer of the environment, above Env and below platform variables.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`

	// WorkingDir is the directory the app starts in; absolute.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	WorkingDir string `json:"workingDir,omitempty"`

	// User to run as: a user of the node an administrator granted to this
	// namespace there (a UserGrant). Empty, the default, means a uid and
	// gid of the Instance's own, never root.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z_][a-z0-9_-]*[$]?$')",message="user must be a valid user name (lowercase letters, digits, '_' and '-')"
	User string `json:"user,omitempty"`

	// Network relaxes what the app may reach; by default nothing of its
	// Instance's processes reaches the cloud metadata service.
	// +optional
	Network *Network `json:"network,omitempty"`

	// Tier is the resource tier: the limits of one generation.
	Tier Tier `json:"tier"`

	// Readiness says when a new generation may take connections.
	// +optional
	Readiness *Readiness `json:"readiness,omitempty"`

	// Seed is a one-shot role run before the first generation starts.
	// +optional
	Seed *Role `json:"seed,omitempty"`

	// Sidecars are processes started with the first generation and kept
	// running beside it, each restarted on its own when it dies.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	Sidecars []Sidecar `json:"sidecars,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="env name must start with a letter or '_' and hold only letters, digits and '_'"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('UNITLET_')",message="env names starting with UNITLET_ are reserved for the platform"
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value,omitempty"`
}

// EnvFromSource names exactly one Secret or ConfigMap in the Instance's
// namespace.
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.configMapRef)",message="envFrom entry needs exactly one of secretRef or configMapRef"
type EnvFromSource struct {
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// +optional
	ConfigMapRef *LocalObjectReference `json:"configMapRef,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Tier is a generation's resource limits.
// +kubebuilder:validation:XValidation:rule="quantity(string(self.memory)).compareTo(quantity('4Mi')) >= 0",message="tier.memory must be at least 4Mi"
// +kubebuilder:validation:XValidation:rule="quantity(string(self.cpu)).isGreaterThan(quantity('0'))",message="tier.cpu must be positive"
type Tier struct {
	// Memory is the generation's memory limit (at least 4Mi).
	Memory resource.Quantity `json:"memory"`
	// CPU is the generation's CPU limit, in cores (e.g. 500m).
	CPU resource.Quantity `json:"cpu"`
	// Pids is the most tasks the generation may have (at least 8).
	// +kubebuilder:validation:XValidation:rule="self >= 8",message="tier.pids must be at least 8"
	Pids int64 `json:"pids"`
}

// Readiness is exactly one probe against the generation's own socket.
// +kubebuilder:validation:XValidation:rule="has(self.httpGet) != has(self.socket)",message="readiness needs exactly one probe: httpGet or socket"
type Readiness struct {
	// HTTPGet is ready when GET path over the app socket answers 2xx/3xx.
	// +optional
	HTTPGet *HTTPGetProbe `json:"httpGet,omitempty"`
	// Socket is ready when a connect to the app socket succeeds.
	// +optional
	Socket *SocketProbe `json:"socket,omitempty"`
	// TimeoutSeconds is how long a new generation may take to become ready
	// before the swap is aborted.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// HTTPGetProbe is an HTTP GET over the unix socket.
type HTTPGetProbe struct {
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="httpGet.path must start with '/'"
	Path string `json:"path,omitempty"`
}

// SocketProbe is ready when a connect succeeds.
type SocketProbe struct{}

// Role is a one-shot or auxiliary process of an Instance.
type Role struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || self[0].startsWith('/')",message="command[0] must be an absolute path, e.g. /usr/bin/app"
	// +listType=atomic
	Command []string `json:"command"`
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Args []string `json:"args,omitempty"`
}

// Sidecar is a named auxiliary process started with the first generation.
type Sidecar struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="sidecar name must be a DNS-1123 label"
	Name string `json:"name"`
	Role `json:",inline"`
}

// Network is what an Instance's processes may reach beyond the default.
type Network struct {
	// CloudMetadata: Deny (the default) refuses every connect and
	// datagram to the cloud metadata service (169.254.169.254,
	// fd00:ec2::254), which hands out the node's credentials. Allow takes
	// a UserGrant of the template's user with cloudMetadata: true.
	// +optional
	// +kubebuilder:default=Deny
	// +kubebuilder:validation:Enum=Deny;Allow
	CloudMetadata string `json:"cloudMetadata,omitempty"`
}

// CloudMetadata values.
const (
	CloudMetadataDeny  = "Deny"
	CloudMetadataAllow = "Allow"
)

// AllowsCloudMetadata says whether t asks to reach the metadata service.
func (t *Template) AllowsCloudMetadata() bool {
	return t.Network != nil && t.Network.CloudMetadata == CloudMetadataAllow
}
