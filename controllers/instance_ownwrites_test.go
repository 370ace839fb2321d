package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
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
