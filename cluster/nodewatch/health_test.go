package nodewatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func lease(renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
		RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: ptr.To(seconds),
	}}
}

func TestHealth(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		facts   Facts
		want    []string // Type=Status/Reason
		recheck time.Duration
	}{
		"no agent enrolled the node": {
			facts: Facts{Node: "n", Now: now},
			want:  []string{"Reconciling=True/NoAgent"},
		},
		"a fresh lease: the agent answers": {
			facts:   Facts{Node: "n", Enrolled: true, Lease: lease(now.Add(-10*time.Second), 40), Now: now},
			recheck: 30 * time.Second,
		},
		"an expired lease": {
			facts: Facts{Node: "n", Enrolled: true, Lease: lease(now.Add(-41*time.Second), 40), Now: now},
			want:  []string{"Ready=Unknown/NodeLost", "Reconciling=True/NodeLost"},
		},
		"enrolled, no lease": {
			facts: Facts{Node: "n", Enrolled: true, Now: now},
			want:  []string{"Ready=Unknown/NodeLost", "Reconciling=True/NodeLost"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := Health(tc.facts)
			var got []string
			for _, c := range v.Conditions {
				got = append(got, c.Type+"="+string(c.Status)+"/"+c.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
			if v.Recheck != tc.recheck {
				t.Errorf("recheck %s, want %s", v.Recheck, tc.recheck)
			}
		})
	}
}

func TestLost(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
			RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: ptr.To[int32](40)}}
	}
	type result struct {
		Lost  bool
		Since time.Time
	}
	tests := map[string]struct {
		facts Facts
		want  result
	}{
		"fresh lease":              {facts: Facts{Enrolled: true, Lease: lease(now), Now: now}, want: result{}},
		"expired: since when":      {facts: Facts{Enrolled: true, Lease: lease(now.Add(-time.Minute)), Now: now}, want: result{Lost: true, Since: now.Add(-20 * time.Second)}},
		"no lease: since unknown":  {facts: Facts{Enrolled: true, Now: now}, want: result{Lost: true}},
		"not enrolled is not lost": {facts: Facts{Now: now}, want: result{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lost, since := Lost(tc.facts)
			if diff := cmp.Diff(tc.want, result{Lost: lost, Since: since}); diff != "" {
				t.Errorf("Lost (-want,+got):\n%s", diff)
			}
		})
	}
}
