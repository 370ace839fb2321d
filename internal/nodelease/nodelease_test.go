package nodelease

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestExpiry(t *testing.T) {
	renewed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type result struct {
		At time.Time
		OK bool
	}
	tests := map[string]struct {
		lease *coordinationv1.Lease
		want  result
	}{
		"no lease": {want: result{}},
		"never renewed": {
			lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](40)}},
			want:  result{},
		},
		"no duration": {
			lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}},
			want:  result{},
		},
		"renewal plus duration": {
			lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
				RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: ptr.To[int32](40)}},
			want: result{At: renewed.Add(40 * time.Second), OK: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at, ok := Expiry(tc.lease)
			if diff := cmp.Diff(tc.want, result{At: at, OK: ok}); diff != "" {
				t.Errorf("Expiry (-want,+got):\n%s", diff)
			}
		})
	}
}
