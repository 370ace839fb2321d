// Package scheme is the runtime.Scheme the agent and its tests share.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// New returns a scheme with the built-in kinds and hosting.unitlet.dev.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // only a programming error can make registration fail
		}
	}
	return s
}
