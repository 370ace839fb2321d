package controllers

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestHistoryIsPruned: beyond spec.generationHistoryLimit, the oldest
// Generations that are retired and proven gone are deleted; the newest
// retired ones, the active one and the newest are kept.
func TestHistoryIsPruned(t *testing.T) {
	create(t, instance("storied", func(i *v1.Instance) { i.Spec.GenerationHistoryLimit = ptr.To[int32](1) }))
	waitServing(t, "storied", 1)
	for n := int64(2); n <= 4; n++ {
		updateInstance(t, "storied", func(i *v1.Instance) { i.Spec.Template.Args = []string{fmt.Sprintf("--v%d", n)} })
		waitServing(t, "storied", n)
	}
	want := map[int64]bool{1: false, 2: false, 3: true, 4: true}
	testutil.Eventually(t, "generations 1 and 2 pruned", waitLimit, pollEvery, func() (bool, string) {
		got := map[int64]bool{}
		for n := range want {
			got[n] = getGeneration(t, "storied", n) != nil
		}
		diff := cmp.Diff(want, got)
		return diff == "", "kept (-want,+got): " + diff
	})
}

// TestHistoryLimitDefaults: an Instance that names no limit gets ten.
func TestHistoryLimitDefaults(t *testing.T) {
	create(t, instance("defaulted"))
	if got := getInstance(t, "defaulted").Spec.GenerationHistoryLimit; got == nil || *got != 10 {
		t.Errorf("generationHistoryLimit = %v, want 10", got)
	}
}
