package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestExecFailureIsNotACrash: an Instance whose new command cannot be
// executed reads ExecFailed with the exec's error and why, on the
// Generation and the Instance, not an exit code; it is retried with the
// restart backoff, and its retries do not push the real history (the
// generations that served) out of generationHistoryLimit.
func TestExecFailureIsNotACrash(t *testing.T) {
	const name = "nocmd"
	const why = "exec /tmp/nothing: no such file or directory (/tmp is private to each app: put the binary in the data dir or a system path)"
	create(t, instance(name, replace, func(i *v1.Instance) { i.Spec.GenerationHistoryLimit = ptr.To[int32](2) }))
	waitServing(t, name, 1)
	updateInstance(t, name, func(i *v1.Instance) { i.Spec.Template.Args = []string{"--v2"} })
	waitServing(t, name, 2)

	fake.set(func(f *fakeRuntime) {
		for n := int64(3); n <= 40; n++ {
			f.execFails[ref(name, n)] = why
		}
	})
	updateInstance(t, name, func(i *v1.Instance) { i.Spec.Template.Command = []string{"/tmp/nothing"} })
	inst := waitInstance(t, name, v1.ConditionReconciling, "True/"+v1.ReasonExecFailed)
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReconciling); c == nil || !strings.Contains(c.Message, why) {
		t.Errorf("Reconciling = %+v, want the exec error and why", c)
	}
	g3 := getGeneration(t, name, 3)
	// Started stays so once it is retired (Ready then says Retired).
	if c := meta.FindStatusCondition(g3.Status.Conditions, v1.ConditionStarted); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != v1.ReasonExecFailed || !strings.Contains(c.Message, why) {
		t.Errorf("generation 3 Started = %+v, want False/ExecFailed with the exec error", c)
	}

	// Several retries later, generations 1 and 2 (what served) are kept
	// and the retired retries are pruned but the newest.
	testutil.Eventually(t, "several retries", waitLimit, pollEvery, func() (bool, string) {
		return getGeneration(t, name, 6) != nil, conditionsOf(getInstance(t, name).Status.Conditions)
	})
	testutil.Eventually(t, "the real history kept, the retries pruned", waitLimit, pollEvery, func() (bool, string) {
		var kept []int64
		for n := int64(1); n <= 40; n++ {
			if getGeneration(t, name, n) != nil {
				kept = append(kept, n)
			}
		}
		latest := slices.Max(kept)
		want := []int64{1, 2, latest - 1, latest}
		return cmp.Equal(want, kept), fmt.Sprintf("kept %v, want %v", kept, want)
	})
}

func TestPrunable(t *testing.T) {
	gen := func(n int64, execFailed bool) *v1.Generation {
		g := &v1.Generation{Spec: v1.GenerationSpec{Number: n}}
		reason := v1.ReasonExited
		if execFailed {
			reason = v1.ReasonExecFailed
		}
		g.Status.Conditions = []metav1.Condition{{Type: v1.ConditionStarted, Status: metav1.ConditionFalse, Reason: reason}}
		return g
	}
	tests := map[string]struct {
		done  []*v1.Generation
		limit int
		want  []int64
	}{
		"within the limit": {
			done: []*v1.Generation{gen(1, false), gen(2, false)}, limit: 2,
		},
		"the oldest beyond the limit": {
			done: []*v1.Generation{gen(1, false), gen(2, false), gen(3, false)}, limit: 2, want: []int64{1},
		},
		"exec failures do not count, the newest of them is kept": {
			done:  []*v1.Generation{gen(1, false), gen(2, false), gen(3, true), gen(4, true), gen(5, true)},
			limit: 2, want: []int64{3, 4},
		},
		"both": {
			done:  []*v1.Generation{gen(1, false), gen(2, true), gen(3, false), gen(4, true)},
			limit: 1, want: []int64{2, 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []int64
			for _, g := range prunable(tc.done, tc.limit) {
				got = append(got, g.Spec.Number)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pruned (-want,+got):\n%s", d)
			}
		})
	}
}
