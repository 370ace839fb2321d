package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestOwnWrites: a cached version known to be older than the agent's own
// last write reads as that write; any other (the write come back, another
// writer's, another Instance of the name) reads as cached and ends what
// was remembered.
func TestOwnWrites(t *testing.T) {
	version := func(uid types.UID, rv string, active int64) *v1.Instance {
		return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i", UID: uid, ResourceVersion: rv},
			Status: v1.InstanceStatus{ActiveGeneration: active}}
	}
	type write struct {
		before string
		obj    *v1.Instance
	}
	tests := map[string]struct {
		writes []write
		reads  []*v1.Instance // cached versions read, in order
		want   []string       // the resourceVersion each read gives
	}{
		"nothing written": {reads: []*v1.Instance{version("u", "5", 0)}, want: []string{"5"}},
		"the cache has not caught up": {
			writes: []write{{"5", version("u", "7", 1)}},
			reads:  []*v1.Instance{version("u", "5", 0), version("u", "5", 0)}, want: []string{"7", "7"}},
		"an earlier write of the agent is older too": {
			writes: []write{{"5", version("u", "6", 0)}, {"6", version("u", "8", 1)}},
			reads:  []*v1.Instance{version("u", "6", 0), version("u", "5", 0)}, want: []string{"8", "8"}},
		"a version read on a conflict is older too": {
			writes: []write{{"5", version("u", "6", 0)}, {"7", version("u", "9", 1)}},
			reads:  []*v1.Instance{version("u", "7", 0)}, want: []string{"9"}},
		"the write came back: the cache again": {
			writes: []write{{"5", version("u", "7", 1)}},
			reads:  []*v1.Instance{version("u", "7", 1), version("u", "5", 0)}, want: []string{"7", "5"}},
		"another writer's version: the cache": {
			writes: []write{{"5", version("u", "7", 1)}},
			reads:  []*v1.Instance{version("u", "6", 0)}, want: []string{"6"}},
		"another Instance of the name: the cache": {
			writes: []write{{"5", version("u", "7", 1)}},
			reads:  []*v1.Instance{version("u2", "5", 0)}, want: []string{"5"}},
		"a new Instance of the name starts afresh": {
			writes: []write{{"5", version("u", "7", 1)}, {"8", version("u2", "9", 2)}},
			reads:  []*v1.Instance{version("u2", "8", 0)}, want: []string{"9"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := &ownWrites{}
			for _, wr := range tc.writes {
				w.wrote(wr.before, wr.obj)
			}
			var got []string
			for _, r := range tc.reads {
				c := r.DeepCopy()
				w.newest(c)
				got = append(got, c.ResourceVersion)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("versions read (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOwnCreates: a listing made before the watch brought back a
// Generation the agent created reads it; a listing that holds it, a
// forgotten Instance or createdKeep ends that; other listings are not
// touched.
func TestOwnCreates(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	gen := func(ns, inst string, n int64) *v1.Generation {
		return &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: generationName(inst, n), UID: "g",
			Labels: map[string]string{v1.LabelInstance: inst}}, Spec: v1.GenerationSpec{Instance: inst, Number: n}}
	}
	ofInstance := func(ns, inst string) *client.ListOptions {
		o := &client.ListOptions{}
		o.ApplyOptions([]client.ListOption{client.InNamespace(ns), client.MatchingLabels{v1.LabelInstance: inst}})
		return o
	}
	type listing struct {
		cached []*v1.Generation
		opts   *client.ListOptions
		at     time.Duration // after the create
	}
	tests := map[string]struct {
		forget   *types.NamespacedName
		listings []listing
		want     [][]string // the names each listing gives
	}{
		"the cache has not caught up": {
			listings: []listing{{opts: ofInstance("ns", "a")}, {opts: ofInstance("ns", "a"), at: time.Second}},
			want:     [][]string{{"a-g2"}, {"a-g2"}}},
		"listed beside the older ones": {
			listings: []listing{{cached: []*v1.Generation{gen("ns", "a", 1)}, opts: ofInstance("ns", "a")}},
			want:     [][]string{{"a-g1", "a-g2"}}},
		"the create came back: the cache alone after": {
			listings: []listing{{cached: []*v1.Generation{gen("ns", "a", 2)}, opts: ofInstance("ns", "a")}, {opts: ofInstance("ns", "a")}},
			want:     [][]string{{"a-g2"}, nil}},
		"another Instance's listing": {
			listings: []listing{{opts: ofInstance("ns", "b")}, {opts: ofInstance("other", "a")}},
			want:     [][]string{nil, nil}},
		"kept no longer than createdKeep": {
			listings: []listing{{opts: ofInstance("ns", "a"), at: createdKeep + time.Second}, {opts: ofInstance("ns", "a")}},
			want:     [][]string{nil, nil}},
		"its Instance forgotten": {
			forget:   &types.NamespacedName{Namespace: "ns", Name: "a"},
			listings: []listing{{opts: ofInstance("ns", "a")}},
			want:     [][]string{nil}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := &ownWrites{}
			w.wroteGeneration(gen("ns", "a", 2), t0)
			if tc.forget != nil {
				w.forget(*tc.forget)
			}
			var got [][]string
			for _, l := range tc.listings {
				list := &v1.GenerationList{}
				for _, g := range l.cached {
					list.Items = append(list.Items, *g)
				}
				w.withCreated(list, l.opts, t0.Add(l.at))
				var names []string
				for _, g := range list.Items {
					names = append(names, g.Name)
				}
				got = append(got, names)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("listings (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOwnCreatesThroughTheClient: the reconciler's client records a
// Generation it created and adds it to a listing from a cache that has
// not caught up (here: one that never does).
func TestOwnCreatesThroughTheClient(t *testing.T) {
	behind := crfake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, gens := list.(*v1.GenerationList); gens {
				return nil // the cache as it was before the create
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	c := &ownWritesClient{Client: behind, w: &ownWrites{}, now: time.Now}
	g := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: generationName("a", 1),
		Labels: map[string]string{v1.LabelInstance: "a"}}, Spec: v1.GenerationSpec{Instance: "a", Number: 1}}
	if err := c.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	gens, err := listGenerations(context.Background(), c, &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gens {
		names = append(names, g.Name)
	}
	if diff := cmp.Diff([]string{"a-g1"}, names); diff != "" {
		t.Errorf("generations listed (-want,+got):\n%s", diff)
	}
}
