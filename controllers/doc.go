// Package controllers holds the reconcilers: they speak Kubernetes and call
// the node runtime through small interfaces.
package controllers
