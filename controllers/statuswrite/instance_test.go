package statuswrite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

var (
	readyTrue      = cond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonReconciled)
	readyLost      = cond(v1.ConditionReady, metav1.ConditionUnknown, v1.ReasonNodeLost)
	reconcLost     = cond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonNodeLost)
	reconcSwapping = cond(v1.ConditionReconciling, metav1.ConditionTrue, v1.ReasonSwapping)
	unprovenFalse  = cond(v1.ConditionKillUnproven, metav1.ConditionFalse, v1.ReasonProven)
	unprovenTrue   = cond(v1.ConditionKillUnproven, metav1.ConditionTrue, v1.ReasonProofTimedOut)
)

func status(active int64, conds ...metav1.Condition) v1.InstanceStatus {
	return v1.InstanceStatus{ActiveGeneration: active, Conditions: conds}
}

func withIdle(s v1.InstanceStatus) v1.InstanceStatus {
	s.IdleSince = &metav1.Time{Time: time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)}
	return s
}

func TestRebase(t *testing.T) {
	tests := map[string]struct {
		base, mine, theirs, want v1.InstanceStatus
	}{
		"nodewatch's NodeLost stands where the agent changed nothing": {
			base:   status(1, readyTrue, unprovenFalse),
			mine:   status(2, readyTrue, unprovenTrue),
			theirs: status(1, readyLost, unprovenFalse, reconcLost),
			want:   status(2, readyLost, unprovenTrue, reconcLost),
		},
		"the agent's own change of a condition nodewatch also changed wins": {
			base:   status(1, readyTrue),
			mine:   status(1, cond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSwapping), reconcSwapping),
			theirs: status(1, readyLost, reconcLost),
			want:   status(1, cond(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSwapping), reconcSwapping),
		},
		"the agent's removal of a condition is kept": {
			base:   status(1, readyTrue, reconcSwapping),
			mine:   status(1, readyTrue),
			theirs: status(1, readyLost, reconcSwapping),
			want:   status(1, readyLost),
		},
		"nodewatch's removal of its own condition is kept": {
			base:   status(1, readyLost, reconcLost, unprovenFalse),
			mine:   status(1, readyLost, reconcLost, unprovenTrue),
			theirs: status(1, unprovenFalse),
			want:   status(1, unprovenTrue),
		},
		"a field the agent did not change keeps the latest (its own write a stale cache missed)": {
			base:   status(1),
			mine:   status(1, readyTrue),
			theirs: withIdle(status(0)),
			want:   withIdle(status(0, readyTrue)),
		},
		"a field the agent changed is its own": {
			base:   withIdle(status(0)),
			mine:   status(2),
			theirs: withIdle(status(0, reconcLost)),
			want:   status(2, reconcLost),
		},
		"a condition new from the agent is added": {
			base:   status(1),
			mine:   status(1, readyTrue),
			theirs: status(1, reconcLost),
			want:   status(1, reconcLost, readyTrue),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Rebase(tc.base, tc.mine, tc.theirs)); diff != "" {
				t.Errorf("Rebase (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestStaleInputsAreNotWritten: a status computed before the Instance's
// spec, deletion or key changed is not laid over the latest version (it
// would say, say, that it waits for a key it has); nodewatch's conditions
// written meanwhile are rebased as before.
func TestStaleInputsAreNotWritten(t *testing.T) {
	mine := status(0, reconcSwapping)
	tests := map[string]struct {
		change  func(*v1.Instance)
		wantErr error
		want    v1.InstanceStatus
	}{
		"nodewatch's conditions: rebased and written": {
			change: func(i *v1.Instance) { i.Status = status(0, readyLost) },
			want:   status(0, readyLost, reconcSwapping)},
		"the key minted meanwhile: not written": {
			change:  func(i *v1.Instance) { i.Status.KeyFingerprint = "fp" },
			wantErr: ErrStale, want: v1.InstanceStatus{KeyFingerprint: "fp"}},
		"the spec changed meanwhile: not written": {
			change:  func(i *v1.Instance) { i.Generation = 2 },
			wantErr: ErrStale, want: v1.InstanceStatus{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stored := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i", UID: "u1", Generation: 1}}
			tc.change(stored)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}).WithObjects(stored).Build()
			base := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i", UID: "u1", Generation: 1, ResourceVersion: "1"}}
			inst := base.DeepCopy()
			inst.Status = mine
			if err := Instance(context.Background(), c, c, inst, base); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Instance: %v, want %v", err, tc.wantErr)
			}
			got := &v1.Instance{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Status); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}
