package instancekey

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestFirstFingerprintOnAStaleRead: the first fingerprint is written
// although the Instance changed since it was read (the agent's finalizer
// and first status, written meanwhile to every new Instance), and only
// where there is none yet, on the same Instance.
func TestFirstFingerprintOnAStaleRead(t *testing.T) {
	agentStatus := v1.InstanceStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{
		Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonInstanceKeyUnavailable, Message: "waiting",
		LastTransitionTime: metav1.Unix(1700000000, 0)}}}
	tests := map[string]struct {
		stored  v1.InstanceStatus // what the API server holds
		readUID types.UID         // the UID of the version the minter read
		want    v1.InstanceStatus
		wantErr bool
	}{
		"nothing written meanwhile": {readUID: "u1",
			want: v1.InstanceStatus{KeyFingerprint: "new"}},
		"the agent's first status written meanwhile": {stored: agentStatus, readUID: "u1",
			want: withFingerprint(agentStatus, "new")},
		"a fingerprint written meanwhile is kept": {stored: withFingerprint(agentStatus, "other"), readUID: "u1",
			want: withFingerprint(agentStatus, "other"), wantErr: true},
		"another Instance of the name now": {stored: agentStatus, readUID: "u0",
			want: agentStatus, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stored := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "i", UID: "u1", Finalizers: []string{v1.Finalizer}},
				Status: tc.stored}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}).WithObjects(stored).Build()
			read := &v1.Instance{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), read); err != nil {
				t.Fatal(err)
			}
			// The version the minter read: before the finalizer and any status.
			read.UID, read.Finalizers, read.Status, read.ResourceVersion = tc.readUID, nil, v1.InstanceStatus{}, "1"
			err := (&Reconciler{Client: c}).writeStatus(context.Background(), read, "new")
			if (err != nil) != tc.wantErr {
				t.Fatalf("writeStatus: err %v, want an error: %v", err, tc.wantErr)
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

func withFingerprint(s v1.InstanceStatus, fp string) v1.InstanceStatus {
	s = *s.DeepCopy()
	s.KeyFingerprint = fp
	return s
}
