package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

func TestHighestElsewhere(t *testing.T) {
	on := func(n int64, node string) *v1.Generation {
		g := generation(n, "h").g
		g.Spec.NodeName = node
		return g
	}
	tests := map[string]struct {
		gens []*v1.Generation
		want int64
	}{
		"none":                      {},
		"only here":                 {gens: []*v1.Generation{on(1, "b"), on(2, "b")}},
		"the old node's":            {gens: []*v1.Generation{on(1, "a"), on(2, "a")}, want: 2},
		"moved away and back":       {gens: []*v1.Generation{on(1, "b"), on(2, "a"), on(3, "c")}, want: 3},
		"newer here than elsewhere": {gens: []*v1.Generation{on(4, "a"), on(5, "b")}, want: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, highestElsewhere(tc.gens, "b")); diff != "" {
				t.Errorf("highestElsewhere (-want,+got):\n%s", diff)
			}
		})
	}
}
