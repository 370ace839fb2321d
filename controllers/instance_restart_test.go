package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
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
		t.Fatalf("generation 3 made %s after generation 2 ended, within the backoff %s", time.Since(died), testRestartBackoff)
	}
	waitInstance(t, "phoenix", v1.ConditionReady, "False/Exited")
	testutil.Eventually(t, "generation 3 crashed at start, retired as one more exit", waitLimit, pollEvery, func() (bool, string) {
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
	testutil.Eventually(t, fmt.Sprintf("generation %d of %s serving", n, name), waitLimit, pollEvery, func() (bool, string) {
		inst = getInstance(t, name)
		return inst.Status.ActiveGeneration == n && condition(inst.Status.Conditions, v1.ConditionReady) == "True/Reconciled",
			fmt.Sprintf("active %d, %s", inst.Status.ActiveGeneration, conditionsOf(inst.Status.Conditions))
	})
	return inst
}

// TestActiveEndsDuringSwap: the serving generation ends while a swap is
// under way and its successor fails too, in either order. Nothing serves
// to fall back to, so a next generation with the new template follows:
// the Instance serves again and is not left Stalled.
func TestActiveEndsDuringSwap(t *testing.T) {
	tests := map[string]struct {
		// successorFailsFirst: g2 crashes at start (an aborted swap)
		// before g1 ends; otherwise g1 ends first, then g2 while it is
		// still not ready.
		successorFailsFirst bool
	}{
		"the active ends first":     {},
		"the successor fails first": {successorFailsFirst: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := "orphaned"
			if tc.successorFailsFirst {
				inst = "abandoned"
			}
			create(t, instance(inst))
			waitServing(t, inst, 1)
			if tc.successorFailsFirst {
				fake.set(func(f *fakeRuntime) { f.start[ref(inst, 2)] = outcome.ExitedBeforeObserved })
			} else {
				fake.set(func(f *fakeRuntime) { f.probe[ref(inst, 2)] = errors.New("injected: not ready yet") })
			}
			updateInstance(t, inst, func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
			if tc.successorFailsFirst {
				waitInstance(t, inst, v1.ConditionStalled, "True/SwapAborted")
				fake.exit(ref(inst, 1), 1)
			} else {
				testutil.Eventually(t, "generation 2 starting", waitLimit, pollEvery, func() (bool, string) {
					return fake.Count("start "+inst+"/g2") == 1, strings.Join(fake.Calls(inst), ", ")
				})
				fake.exit(ref(inst, 1), 1)
				testutil.Eventually(t, "generation 1's end seen", waitLimit, pollEvery, func() (bool, string) {
					g := getGeneration(t, inst, 1)
					return exited(g), string(g.Status.Phase)
				})
				fake.exit(ref(inst, 2), 1)
			}
			got := waitServing(t, inst, 3)
			if c := condition(got.Status.Conditions, v1.ConditionStalled); c != "absent" {
				t.Errorf("Stalled = %s, want absent", c)
			}
			if g3, g2 := getGeneration(t, inst, 3), getGeneration(t, inst, 2); g3.Annotations[AnnotationTemplateHash] != g2.Annotations[AnnotationTemplateHash] {
				t.Error("g3 does not carry g2's (the new) template")
			}
			// Retired by the reconcile after the promotion, which is
			// already Ready (see promote).
			testutil.Eventually(t, "g1 retired", waitLimit, pollEvery, func() (bool, string) {
				g1 := getGeneration(t, inst, 1)
				return g1.Spec.Retired, string(g1.Status.Phase)
			})
		})
	}
}

// TestFirstGenerationCrashLoops: an app that exits at once with nothing
// served yet is restarted with the backoff (a kubelet's CrashLoopBackOff),
// not left Stalled; its Generation says it ran and then exited.
func TestFirstGenerationCrashLoops(t *testing.T) {
	const inst = "crashloop"
	fake.set(func(f *fakeRuntime) { f.start[ref(inst, 1)] = outcome.ExitedBeforeObserved })
	create(t, instance(inst))
	waitServing(t, inst, 2)
	g1 := getGeneration(t, inst, 1)
	if !g1.Spec.Retired || g1.Annotations[AnnotationRetiredBecause] != RetiredExited {
		t.Errorf("g1 retired %v because %q, want retired because %s", g1.Spec.Retired, g1.Annotations[AnnotationRetiredBecause], RetiredExited)
	}
	if c := condition(getInstance(t, inst).Status.Conditions, v1.ConditionStalled); c != "absent" {
		t.Errorf("Stalled = %s, want absent", c)
	}
}

// TestUncertainStartGivenUp: a start whose answer never comes is given up
// after the readiness timeout: retired, proven gone, and replaced, so the
// Instance serves instead of waiting forever.
func TestUncertainStartGivenUp(t *testing.T) {
	const inst = "unresolved"
	fake.set(func(f *fakeRuntime) { f.start[ref(inst, 1)] = outcome.MayHaveRun })
	create(t, instance(inst, func(i *v1.Instance) { i.Spec.Template.Readiness.TimeoutSeconds = 1 }))
	waitServing(t, inst, 2)
	g1 := getGeneration(t, inst, 1)
	// Whether it ran stays unknown; that nothing of it runs now is proven.
	if got := condition(g1.Status.Conditions, v1.ConditionStarted); got != "Unknown/"+v1.ReasonMayHaveRun {
		t.Errorf("g1 Started = %s, want Unknown/%s", got, v1.ReasonMayHaveRun)
	}
	if !terminated(g1) {
		t.Error("g1 given up without a proof that nothing of it runs")
	}
	if c := condition(getInstance(t, inst).Status.Conditions, v1.ConditionStartUncertain); c == "True/"+v1.ReasonMayHaveRun {
		t.Errorf("StartUncertain = %s after the proof", c)
	}
}

// TestLostEventStillSeen: a serving app that ends with no event (the
// runtime's buffer was full) is noticed at the next look, and replaced.
func TestLostEventStillSeen(t *testing.T) {
	const inst = "quiet"
	create(t, instance(inst))
	waitServing(t, inst, 1)
	fake.exitQuietly(ref(inst, 1), 1)
	waitServing(t, inst, 2)
}
