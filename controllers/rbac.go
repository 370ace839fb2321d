package controllers

// The agent checks who scrapes its metrics with the API server, as the
// kubelet does: TokenReview authenticates the caller, SubjectAccessReview
// authorizes GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
