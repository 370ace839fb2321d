package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestCachedGenerations: through the index, an Instance's reconcile
// reads its own Generations, oldest first, as the label selector does.
func TestCachedGenerations(t *testing.T) {
	gen := func(ns, inst string, n int64) *v1.Generation {
		g := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: generationName(inst, n)},
			Spec: v1.GenerationSpec{Instance: inst, Number: n}}
		if inst != "" {
			g.Labels = map[string]string{v1.LabelInstance: inst}
		}
		return g
	}
	inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).
		WithIndex(&v1.Generation{}, indexGenerationInstance, generationInstance).
		WithObjects(gen("a", "web", 3), gen("a", "web", 1), gen("a", "api", 1), gen("b", "web", 2), gen("a", "", 9)).Build()
	names := func(gens []*v1.Generation) (out []string) {
		for _, g := range gens {
			out = append(out, g.Namespace+"/"+g.Name)
		}
		return out
	}
	byIndex, err := cachedGenerations(context.Background(), c, inst)
	if err != nil {
		t.Fatal(err)
	}
	byLabel, err := listGenerations(context.Background(), c, inst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/" + generationName("web", 1), "a/" + generationName("web", 3)}
	if d := cmp.Diff(want, names(byIndex)); d != "" {
		t.Errorf("through the index (-want,+got):\n%s", d)
	}
	if d := cmp.Diff(names(byLabel), names(byIndex)); d != "" {
		t.Errorf("the index against the label selector (-label,+index):\n%s", d)
	}

	// The reconciler's own creates, not yet in the cache, are matched by
	// the same field: another Instance's is not its.
	own := &ownWritesClient{Client: c, w: &ownWrites{}, now: time.Now}
	for _, g := range []*v1.Generation{gen("a", "web", 4), gen("a", "api", 2)} {
		if err := own.Create(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(context.Background(), g); err != nil { // as if the cache had not seen it yet
			t.Fatal(err)
		}
	}
	withOwn, err := cachedGenerations(context.Background(), own, inst)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, "a/"+generationName("web", 4))
	if d := cmp.Diff(want, names(withOwn)); d != "" {
		t.Errorf("with its own creates (-want,+got):\n%s", d)
	}
}
