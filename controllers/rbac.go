package controllers

// The agent checks who scrapes its metrics with the API server, as the
// kubelet does: TokenReview authenticates the caller, SubjectAccessReview
// authorizes GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The agent renews its node's Lease in its own namespace (a Role, not a
// ClusterRole); the admission policy keeps it to its own node's Lease.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=unitlet-system

// The agent's endpoint serves only the relay, whose client certificate it
// verifies against the relay CA published in this ConfigMap (read with
// GETs, by name).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch,namespace=unitlet-system,resourceNames=unitlet-relay-ca
