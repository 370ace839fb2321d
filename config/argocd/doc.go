// Package argocd holds Argo CD health checks for Instances and
// Generations (instance.lua, generation.lua) and makes the argocd-cm
// snippet that installs them, embedding the scripts verbatim.
package argocd

//go:generate go run ./gen
