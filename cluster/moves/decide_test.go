package moves

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

type instB struct{ i *v1.Instance }

func instance(target string) instB {
	return instB{&v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}, Spec: v1.InstanceSpec{NodeName: target}}}
}

func (b instB) serving(n int64, node string) instB {
	b.i.Status.ActiveGeneration, b.i.Status.NodeName = n, node
	return b
}
func (b instB) suspended() instB { b.i.Spec.Suspend = true; return b }
func (b instB) deleting() instB {
	b.i.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	return b
}

type genB struct{ g *v1.Generation }

func gen(n int64, node string) genB {
	return genB{&v1.Generation{ObjectMeta: metav1.ObjectMeta{Name: "app-" + string(rune('0'+n))},
		Spec: v1.GenerationSpec{Instance: "app", NodeName: node, Number: n}}}
}
func (b genB) retired() genB { b.g.Spec.Retired = true; return b }
func (b genB) gone() genB {
	b.g.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTerminated, Status: metav1.ConditionTrue}}
	return b
}
func (b genB) beingDeleted() genB {
	b.g.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	return b
}

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	settle := 2 * time.Second
	tests := map[string]struct {
		inst         instB
		gens         []genB
		servingSince time.Time
		wantRetire   []int64
		wantDelete   []int64
		wantWait     time.Duration
	}{
		"unplaced": {inst: instance("")},
		"no move: one node": {
			inst: instance("a").serving(2, "a"), gens: []genB{gen(1, "a").retired().gone(), gen(2, "a")},
			servingSince: now.Add(-time.Hour),
		},
		"move under way: the old node keeps serving": {
			inst: instance("b").serving(2, "a"), gens: []genB{gen(2, "a"), gen(3, "b")},
		},
		"moved, just now: wait for the front ends": {
			inst: instance("b").serving(3, "b"), gens: []genB{gen(2, "a"), gen(3, "b")},
			servingSince: now, wantWait: settle,
		},
		"moved, first seen: wait the whole settle": {
			inst: instance("b").serving(3, "b"), gens: []genB{gen(2, "a"), gen(3, "b")},
			wantWait: settle,
		},
		"moved, settled: retire the old node's": {
			inst: instance("b").serving(3, "b"), gens: []genB{gen(1, "a").retired(), gen(2, "a"), gen(3, "b")},
			servingSince: now.Add(-settle), wantRetire: []int64{2},
		},
		"moved, old ones retired already: nothing": {
			inst: instance("b").serving(3, "b"), gens: []genB{gen(2, "a").retired(), gen(3, "b")},
			servingSince: now.Add(-time.Minute),
		},
		"status names the target but its serving number is the old node's": {
			inst: instance("b").serving(2, "b"), gens: []genB{gen(2, "a"), gen(3, "b")},
			servingSince: now.Add(-time.Minute),
		},
		"moved twice: both old nodes retired": {
			inst: instance("c").serving(5, "c"), gens: []genB{gen(3, "a"), gen(4, "b"), gen(5, "c")},
			servingSince: now.Add(-time.Minute), wantRetire: []int64{3, 4},
		},
		"suspended: the old node's retired at once": {
			inst: instance("b").serving(2, "a").suspended(), gens: []genB{gen(2, "a"), gen(3, "b")},
			wantRetire: []int64{2},
		},
		"deleting: the old node's deleted, proven gone or not": {
			inst:       instance("b").serving(3, "b").deleting(),
			gens:       []genB{gen(1, "a").retired().gone(), gen(2, "a"), gen(3, "b"), gen(4, "c").beingDeleted()},
			wantDelete: []int64{1, 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var gens []*v1.Generation
			for _, b := range tc.gens {
				gens = append(gens, b.g)
			}
			p := Decide(Facts{Instance: tc.inst.i, Gens: gens, ServingSince: tc.servingSince, Now: now, Settle: settle})
			if diff := cmp.Diff(tc.wantRetire, numbers(p.Retire)); diff != "" {
				t.Errorf("retire (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDelete, numbers(p.Delete)); diff != "" {
				t.Errorf("delete (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWait, p.Wait); diff != "" {
				t.Errorf("wait (-want,+got):\n%s", diff)
			}
		})
	}
}

func numbers(gens []*v1.Generation) []int64 {
	var out []int64
	for _, g := range gens {
		out = append(out, g.Spec.Number)
	}
	return out
}
