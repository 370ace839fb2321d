package instancekey

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// TestFirstFingerprintOnAStaleRead: the first fingerprint is written
// although the Instance changed since it was read (the agent's finalizer
// and first status, written meanwhile to every new Instance), and only
// where there is none yet, on the same Instance; where there is, nothing
// is written and nothing retried (the change that set it reconciles).
func TestFirstFingerprintOnAStaleRead(t *testing.T) {
	agentStatus := v1.InstanceStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{
		Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonInstanceKeyUnavailable, Message: "waiting",
		LastTransitionTime: metav1.Unix(1700000000, 0)}}}
	tests := map[string]struct {
		stored  v1.InstanceStatus // what the API server holds
		readUID types.UID         // the UID of the version the minter read
		want    v1.InstanceStatus
	}{
		"nothing written meanwhile": {readUID: "u1",
			want: v1.InstanceStatus{KeyFingerprint: "new"}},
		"the agent's first status written meanwhile": {stored: agentStatus, readUID: "u1",
			want: withFingerprint(agentStatus, "new")},
		"a fingerprint written meanwhile is kept": {stored: withFingerprint(agentStatus, "other"), readUID: "u1",
			want: withFingerprint(agentStatus, "other")},
		"another Instance of the name now": {stored: agentStatus, readUID: "u0",
			want: agentStatus},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stored := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "i", UID: "u1", Finalizers: []string{v1.Finalizer}},
				Status: tc.stored}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Instance{}).WithObjects(stored).
				WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: asTheAPIServer}).Build()
			read := &v1.Instance{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), read); err != nil {
				t.Fatal(err)
			}
			// The version the minter read: before the finalizer and any status.
			read.UID, read.Finalizers, read.Status, read.ResourceVersion = tc.readUID, nil, v1.InstanceStatus{}, "1"
			if err := (&Reconciler{Client: c}).writeStatus(context.Background(), read, "new"); err != nil {
				t.Fatalf("writeStatus: %v", err)
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

// asTheAPIServer answers a JSON patch whose test fails as the API server
// does: 422, Invalid.
func asTheAPIServer(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	var status apierrors.APIStatus
	if err != nil && patch.Type() == types.JSONPatchType && !errors.As(err, &status) {
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return err
}

func withFingerprint(s v1.InstanceStatus, fp string) v1.InstanceStatus {
	s = *s.DeepCopy()
	s.KeyFingerprint = fp
	return s
}

// TestKeyInputsChanged: the agent's status writes do not wake the minter;
// what a key decision reads does.
func TestKeyInputsChanged(t *testing.T) {
	base := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "i", UID: "u1"}}
	now := metav1.Unix(1700000000, 0)
	tests := map[string]struct {
		change func(*v1.Instance)
		want   bool
	}{
		"the agent's finalizer": {func(i *v1.Instance) { i.Finalizers = []string{v1.Finalizer} }, false},
		"the agent's status": {func(i *v1.Instance) {
			i.Status.ObservedGeneration, i.Status.ActiveGeneration = 1, 1
		}, false},
		"the fingerprint":          {func(i *v1.Instance) { i.Status.KeyFingerprint = "fp" }, true},
		"a rotation asked":         {func(i *v1.Instance) { i.Annotations = map[string]string{v1.AnnotationRotateKey: "1"} }, true},
		"the deletion":             {func(i *v1.Instance) { i.DeletionTimestamp = &now }, true},
		"another Instance of name": {func(i *v1.Instance) { i.UID = "u2" }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.change(n)
			if got := keyInputsChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tc.want {
				t.Errorf("passed: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBehindItsOwnWrite: a reconcile that reads the Instance before the
// fingerprint this minter wrote came back does nothing (the new Secret's
// event woke it: it would mint or write again, and fail); once the cache
// has a fingerprint, or holds another Instance of the name, it decides.
func TestBehindItsOwnWrite(t *testing.T) {
	key := types.NamespacedName{Namespace: "default", Name: "i"}
	read := func(uid types.UID, fp string) *v1.Instance {
		return &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: uid},
			Status: v1.InstanceStatus{KeyFingerprint: fp}}
	}
	tests := map[string]struct {
		written bool
		reads   []*v1.Instance
		want    []bool
	}{
		"nothing written":                  {reads: []*v1.Instance{read("u1", "")}, want: []bool{false}},
		"written, the cache behind":        {written: true, reads: []*v1.Instance{read("u1", ""), read("u1", "")}, want: []bool{true, true}},
		"written, come back":               {written: true, reads: []*v1.Instance{read("u1", "fp"), read("u1", "")}, want: []bool{false, false}},
		"another Instance of the name now": {written: true, reads: []*v1.Instance{read("u2", "")}, want: []bool{false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{}
			if tc.written {
				r.remember(key, "u1")
			}
			var got []bool
			for _, inst := range tc.reads {
				got = append(got, r.behind(inst))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("behind (-want,+got):\n%s", diff)
			}
		})
	}
}
