package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

func TestMoveWhy(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	healthy := NodeHealth{Enrolled: true, Approved: true, Expiry: now.Add(30 * time.Second)}
	lostAgo := func(d time.Duration) NodeHealth {
		return NodeHealth{Enrolled: true, Approved: true, Lost: true, LostSince: now.Add(-d)}
	}
	on := func(spec, status string, moves v1.MovePolicy, edit ...func(*v1.Instance)) *v1.Instance {
		i := inst("a", spec, status)
		i.Spec.Placement = &v1.Placement{Moves: moves}
		for _, e := range edit {
			e(&i)
		}
		return &i
	}
	drain := func(node string) func(*v1.Instance) {
		return func(i *v1.Instance) { i.Annotations = map[string]string{v1.AnnotationMoveFrom: node} }
	}
	lostAfter := func(s int32) func(*v1.Instance) {
		return func(i *v1.Instance) { i.Spec.Placement.LostAfterSeconds = ptr.To(s) }
	}
	type result struct {
		Why     string
		Recheck time.Duration
	}
	tests := map[string]struct {
		inst   *v1.Instance
		health NodeHealth
		want   result
	}{
		"healthy: stays, looked at again when the Lease could run out plus lostAfter": {
			inst: on("n1", "n1", v1.MovesAllowed), health: healthy,
			want: result{Recheck: 330 * time.Second},
		},
		"moves Never: stays, whatever happens": {
			inst: on("n1", "n1", v1.MovesNever, drain("n1")), health: NodeHealth{},
			want: result{},
		},
		"no placement at all is Never": {
			inst: func() *v1.Instance { i := inst("a", "n1", "n1"); return &i }(), health: NodeHealth{},
			want: result{},
		},
		"drained": {
			inst: on("n1", "n1", v1.MovesAllowed, drain("n1")), health: healthy,
			want: result{Why: "node n1 is being drained"},
		},
		"a drain of another node is not this one's": {
			inst: on("n1", "n1", v1.MovesAllowed, drain("n0")), health: healthy,
			want: result{Recheck: 330 * time.Second},
		},
		"drained while a move is in flight: waits": {
			inst: on("n2", "n1", v1.MovesAllowed, drain("n2")), health: healthy,
			want: result{Recheck: 330 * time.Second},
		},
		"Enrollment gone": {
			inst: on("n1", "n1", v1.MovesAllowed), health: NodeHealth{},
			want: result{Why: "node n1 has no Enrollment"},
		},
		"unapproved": {
			inst: on("n1", "n1", v1.MovesAllowed), health: NodeHealth{Enrolled: true},
			want: result{Why: "node n1's Enrollment is not approved"},
		},
		"the target of an in-flight move is gone: moves again": {
			inst: on("n2", "n1", v1.MovesAllowed), health: NodeHealth{},
			want: result{Why: "node n2 has no Enrollment"},
		},
		"lost for less than lostAfterSeconds: waits the rest": {
			inst: on("n1", "n1", v1.MovesAllowed), health: lostAgo(100 * time.Second),
			want: result{Recheck: 200 * time.Second},
		},
		"lost exactly lostAfterSeconds: moves": {
			inst: on("n1", "n1", v1.MovesAllowed), health: lostAgo(300 * time.Second),
			want: result{Why: "node n1 is lost since 2026-01-02T02:59:05Z"},
		},
		"lostAfterSeconds 0 moves at once": {
			inst: on("n1", "n1", v1.MovesAllowed, lostAfter(0)), health: lostAgo(0),
			want: result{Why: "node n1 is lost since 2026-01-02T03:04:05Z"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			why, recheck := MoveWhy(tc.inst, tc.health, now)
			if diff := cmp.Diff(tc.want, result{Why: why, Recheck: recheck}); diff != "" {
				t.Errorf("MoveWhy (-want,+got):\n%s", diff)
			}
		})
	}
}
