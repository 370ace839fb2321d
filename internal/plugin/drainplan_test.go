package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// inst is an Instance of namespace ns bound to spec and served on
// status, moves Allowed when allowed.
func inst(ns, name, spec, status string, allowed bool, mods ...func(*v1.Instance)) v1.Instance {
	in := v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.InstanceSpec{NodeName: spec}, Status: v1.InstanceStatus{NodeName: status}}
	if allowed {
		in.Spec.Placement = &v1.Placement{Moves: v1.MovesAllowed}
	}
	for _, m := range mods {
		m(&in)
	}
	return in
}

func asked(node string) func(*v1.Instance) {
	return func(in *v1.Instance) { in.Annotations = map[string]string{v1.AnnotationMoveFrom: node} }
}

func gen(ns, instance, node string, number int64, terminated metav1.ConditionStatus) v1.Generation {
	g := v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: instance + "-g"},
		Spec: v1.GenerationSpec{Instance: instance, NodeName: node, Number: number}}
	if terminated != "" {
		g.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTerminated, Status: terminated}}
	}
	return g
}

// Each Instance with anything on the node, and each one seen before,
// gets the state its move is in; the rest of the cluster is not looked at.
func TestAssess(t *testing.T) {
	now := metav1.Now()
	unschedulable := func(in *v1.Instance) {
		in.Status.Conditions = []metav1.Condition{{Type: v1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason: v1.ReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient memory"}}
	}
	tests := map[string]struct {
		insts []v1.Instance
		gens  []v1.Generation
		seen  map[string]string
		want  []instanceView
	}{
		"moves Never stays": {
			insts: []v1.Instance{inst("a", "x", "n1", "n1", false)},
			want:  []instanceView{{key: "a/x", state: stateStays}},
		},
		"moves Never unserved yet stays": {
			insts: []v1.Instance{inst("a", "x", "n1", "", false, asked("n1"))},
			want:  []instanceView{{key: "a/x", state: stateStays}},
		},
		"allowed, not asked": {
			insts: []v1.Instance{inst("a", "x", "n1", "n1", true)},
			want:  []instanceView{{key: "a/x", state: stateAsk}},
		},
		"allowed, asked off another node": {
			insts: []v1.Instance{inst("a", "x", "n1", "n1", true, asked("n9"))},
			want:  []instanceView{{key: "a/x", state: stateAsk}},
		},
		"asked, no node fits": {
			insts: []v1.Instance{inst("a", "x", "n1", "n1", true, asked("n1"), unschedulable)},
			want:  []instanceView{{key: "a/x", state: stateAsked, why: "Unschedulable: 0/2 nodes are available: 2 Insufficient memory"}},
		},
		"bound elsewhere, still served here": {
			insts: []v1.Instance{inst("a", "x", "n2", "n1", true)},
			gens:  []v1.Generation{gen("a", "x", "n1", 3, "")},
			want:  []instanceView{{key: "a/x", state: stateMoving, to: "n2", live: []int64{3}}},
		},
		"served elsewhere, old generations not proven gone": {
			insts: []v1.Instance{inst("a", "x", "n2", "n2", true)},
			gens: []v1.Generation{gen("a", "x", "n1", 3, metav1.ConditionFalse), gen("a", "x", "n1", 2, ""),
				gen("a", "x", "n1", 1, metav1.ConditionTrue), gen("a", "x", "n2", 4, "")},
			want: []instanceView{{key: "a/x", state: stateRetiring, to: "n2", live: []int64{2, 3}}},
		},
		"moved and seen before": {
			insts: []v1.Instance{inst("a", "x", "n2", "n2", true)},
			gens:  []v1.Generation{gen("a", "x", "n1", 3, metav1.ConditionTrue)},
			seen:  map[string]string{"a/x": "instance/a/x moving to n2"},
			want:  []instanceView{{key: "a/x", state: stateMoved, to: "n2"}},
		},
		"moved, never seen here: not listed": {
			insts: []v1.Instance{inst("a", "x", "n2", "n2", true)},
			gens:  []v1.Generation{gen("a", "x", "n1", 3, metav1.ConditionTrue)},
		},
		"being deleted": {
			insts: []v1.Instance{inst("a", "x", "n1", "n1", false, func(in *v1.Instance) { in.DeletionTimestamp = &now })},
			want:  []instanceView{{key: "a/x", state: stateDeleting}},
		},
		"same name in two namespaces, sorted": {
			insts: []v1.Instance{inst("b", "x", "n1", "n1", true), inst("a", "x", "n1", "n1", false), inst("a", "y", "n3", "n3", true)},
			gens:  []v1.Generation{gen("b", "x", "n1", 1, ""), gen("a", "x", "n1", 7, "")},
			want:  []instanceView{{key: "a/x", state: stateStays, live: []int64{7}}, {key: "b/x", state: stateAsk, live: []int64{1}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := assess("n1", tc.insts, tc.gens, tc.seen)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(instanceView{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The lines a drain prints, one per change of an Instance's state.
func TestProgressLines(t *testing.T) {
	tests := map[string]struct {
		seen      map[string]string
		views     []instanceView
		want      []string
		wantAfter map[string]string
	}{
		"first look": {
			seen: map[string]string{},
			views: []instanceView{{key: "a/never", state: stateStays}, {key: "a/x", state: stateAsked},
				{key: "a/y", state: stateMoving, to: "n2"}, {key: "a/z", state: stateRetiring, to: "n3", live: []int64{4}},
				{key: "a/w", state: stateRetiring, to: "n3", live: []int64{2, 4}}, {key: "a/d", state: stateDeleting}},
			want: []string{"instance/a/never stays: moves: Never: its data dir lives on n1", "instance/a/x waiting for a node",
				"instance/a/y moving to n2", "instance/a/z serving on n3, stopping generation 4 on n1",
				"instance/a/w serving on n3, stopping generations 2, 4 on n1", "instance/a/d is being deleted"},
			wantAfter: map[string]string{"a/never": "instance/a/never stays: moves: Never: its data dir lives on n1",
				"a/x": "instance/a/x waiting for a node", "a/y": "instance/a/y moving to n2",
				"a/z": "instance/a/z serving on n3, stopping generation 4 on n1",
				"a/w": "instance/a/w serving on n3, stopping generations 2, 4 on n1", "a/d": "instance/a/d is being deleted"},
		},
		"only what changed, and what went": {
			seen: map[string]string{"a/x": "instance/a/x waiting for a node", "a/y": "instance/a/y moving to n2", "a/gone": "instance/a/gone moving to n2"},
			views: []instanceView{{key: "a/x", state: stateAsked, why: "Unschedulable: 0/1 nodes are available"},
				{key: "a/y", state: stateMoving, to: "n2"}},
			want:      []string{"instance/a/x waiting for a node: Unschedulable: 0/1 nodes are available", "instance/a/gone deleted"},
			wantAfter: map[string]string{"a/x": "instance/a/x waiting for a node: Unschedulable: 0/1 nodes are available", "a/y": "instance/a/y moving to n2"},
		},
		"moved": {
			seen:      map[string]string{"a/y": "instance/a/y moving to n2"},
			views:     []instanceView{{key: "a/y", state: stateMoved, to: "n2"}},
			want:      []string{"instance/a/y moved to n2"},
			wantAfter: map[string]string{"a/y": "instance/a/y moved to n2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := newLines("n1", tc.seen, tc.views)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAfter, tc.seen); diff != "" {
				t.Errorf("seen (-want,+got):\n%s", diff)
			}
		})
	}
}

// A drain is over when nothing but moves-Never Instances is left.
func TestOutcome(t *testing.T) {
	tests := map[string]struct {
		views       []instanceView
		wantPending string
		wantStays   string
	}{
		"empty node": {},
		"all moved":  {views: []instanceView{{key: "a/x", state: stateMoved}, {key: "a/y", state: stateMoved}}},
		"only Never": {views: []instanceView{{key: "a/x", state: stateMoved}, {key: "a/n", state: stateStays}}, wantStays: "instance/a/n"},
		"in progress": {
			views: []instanceView{{key: "a/1", state: stateAsk}, {key: "a/2", state: stateAsked}, {key: "a/3", state: stateMoving},
				{key: "a/4", state: stateRetiring}, {key: "a/5", state: stateDeleting}, {key: "a/6", state: stateStays}, {key: "a/7", state: stateAsk}},
			wantPending: "instance/a/1, instance/a/2, instance/a/3, instance/a/4, instance/a/5, instance/a/7",
			wantStays:   "instance/a/6",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pending, stays := outcome(tc.views)
			got := []string{keys(pending), keys(stays)}
			if diff := cmp.Diff([]string{tc.wantPending, tc.wantStays}, got); diff != "" {
				t.Errorf("pending, stays (-want,+got):\n%s", diff)
			}
		})
	}
}
