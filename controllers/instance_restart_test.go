package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestExitedGenerationIsReplaced: the serving generation's app ends on its
// own; a successor with the same template replaces it at once and serves.
// When that one ends too, the next waits out the restart backoff, and one
// that crashes at start is one more crash, not an aborted swap.
func TestExitedGenerationIsReplaced(t *testing.T) {
	create(t, instance("phoenix"))
	waitInstance(t, "phoenix", v1.ConditionReady, "True/Reconciled")
	g1 := getGeneration(t, "phoenix", 1)

	fake.exit(ref("phoenix", 1), 1)
	inst := waitServing(t, "phoenix", 2)
	if got := condition(inst.Status.Conditions, v1.ConditionReady); got != "True/Reconciled" {
		t.Errorf("Ready = %s after the replacement", got)
	}
	g1 = getGeneration(t, "phoenix", 1)
	if !g1.Spec.Retired || g1.Annotations[AnnotationRetiredBecause] != RetiredExited {
		t.Errorf("g1 retired %v because %q, want retired because %s", g1.Spec.Retired, g1.Annotations[AnnotationRetiredBecause], RetiredExited)
	}
	if g2 := getGeneration(t, "phoenix", 2); g2.Annotations[AnnotationTemplateHash] != g1.Annotations[AnnotationTemplateHash] {
		t.Errorf("g2's template hash %s, want g1's %s", g2.Annotations[AnnotationTemplateHash], g1.Annotations[AnnotationTemplateHash])
	}

	// Ends again at once, and its successor crashes at start.
	fake.set(func(f *fakeRuntime) { f.start[ref("phoenix", 3)] = outcome.ExitedBeforeObserved })
	died := time.Now()
	fake.exit(ref("phoenix", 2), 1)
	waitInstance(t, "phoenix", v1.ConditionReconciling, "True/BackOff")
	if getGeneration(t, "phoenix", 3) != nil {
		t.Fatalf("generation 3 made %s after generation 2 ended, within the backoff %s", time.Since(died), testSidecarBackoff)
	}
	waitInstance(t, "phoenix", v1.ConditionReady, "False/Exited")
	eventually(t, "generation 3 crashed at start, retired as one more exit", func() (bool, string) {
		g3 := getGeneration(t, "phoenix", 3)
		return g3 != nil && retiredBecause(g3) == RetiredExited, conditionsOf(getInstance(t, "phoenix").Status.Conditions)
	})
	if inst := getInstance(t, "phoenix"); condition(inst.Status.Conditions, v1.ConditionStalled) != "absent" {
		t.Errorf("Stalled = %s: a crash loop with nothing serving is not an aborted swap", condition(inst.Status.Conditions, v1.ConditionStalled))
	}
	// Generation 4 starts as it should, after its own backoff.
	waitServing(t, "phoenix", 4)
}

// waitServing waits until generation n of name serves and the Instance is
// Ready.
func waitServing(t *testing.T, name string, n int64) *v1.Instance {
	t.Helper()
	var inst *v1.Instance
	eventually(t, fmt.Sprintf("generation %d of %s serving", n, name), func() (bool, string) {
		inst = getInstance(t, name)
		return inst.Status.ActiveGeneration == n && condition(inst.Status.Conditions, v1.ConditionReady) == "True/Reconciled",
			fmt.Sprintf("active %d, %s", inst.Status.ActiveGeneration, conditionsOf(inst.Status.Conditions))
	})
	return inst
}

// TestActiveEndsDuringSwap: the serving generation ends while its
// successor is still starting, and the successor then fails too. Nothing
// serves to fall back to, so it is one more crash and a next generation
// with the new template follows; not an aborted swap.
func TestActiveEndsDuringSwap(t *testing.T) {
	create(t, instance("orphaned"))
	waitServing(t, "orphaned", 1)
	fake.set(func(f *fakeRuntime) { f.probe[ref("orphaned", 2)] = errors.New("injected: not ready yet") })
	updateInstance(t, "orphaned", func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	eventually(t, "generation 2 starting", func() (bool, string) {
		return fake.Count("start orphaned/g2") == 1, strings.Join(fake.Calls("orphaned"), ", ")
	})
	fake.exit(ref("orphaned", 1), 1)
	fake.exit(ref("orphaned", 2), 1)
	inst := waitServing(t, "orphaned", 3)
	if got := condition(inst.Status.Conditions, v1.ConditionStalled); got != "absent" {
		t.Errorf("Stalled = %s, want absent", got)
	}
	if g2 := getGeneration(t, "orphaned", 2); retiredBecause(g2) != RetiredExited {
		t.Errorf("g2 retired because %q, want %s", retiredBecause(g2), RetiredExited)
	}
	if g3 := getGeneration(t, "orphaned", 3); g3.Annotations[AnnotationTemplateHash] != getGeneration(t, "orphaned", 2).Annotations[AnnotationTemplateHash] {
		t.Error("g3 does not carry g2's (the new) template")
	}
}
