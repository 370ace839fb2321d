package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// TestServesAgain: after a reboot only an Instance that served when the
// node went down, and asks for nothing but serving again, is started
// before the reconcilers run; every other is left to them.
func TestServesAgain(t *testing.T) {
	const node, uid = "n1", types.UID("inst-uid")
	served := func(mod ...func(*v1.Instance)) *v1.Instance {
		i := &v1.Instance{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: uid, Finalizers: []string{v1.Finalizer}},
			Spec:       v1.InstanceSpec{NodeName: node, Host: "a.example.com"},
			Status:     v1.InstanceStatus{ActiveGeneration: 2, KeyFingerprint: "fp", NodeName: node},
		}
		for _, m := range mod {
			m(i)
		}
		return i
	}
	gen := func(n int64, uid string) *v1.Generation {
		return &v1.Generation{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: v1.GenerationSpec{Number: n}}
	}
	gone := func(g *v1.Generation) *v1.Generation {
		g.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTerminated, Status: metav1.ConditionTrue, Reason: "Proven"}}
		return g
	}
	// The reboot took g1 and g2 of every case (uids "old-*").
	oldBoot := func(g *v1.Generation) bool { return len(g.UID) > 4 && g.UID[:4] == "old-" }
	claim := &v1.HostClaim{Spec: v1.HostClaimSpec{UID: uid}}
	twoOld := []*v1.Generation{gone(gen(1, "g1")), gen(2, "old-2")}
	tests := map[string]struct {
		inst  *v1.Instance
		gens  []*v1.Generation
		claim *v1.HostClaim
		want  int64 // 0: left to the reconcilers
	}{
		"served when the node went down: the next number":  {inst: served(), gens: twoOld, claim: claim, want: 3},
		"mid-swap: numbered after the newest":              {inst: served(), gens: append(twoOld, gen(3, "old-3")), claim: claim, want: 4},
		"never served yet":                                 {inst: served(func(i *v1.Instance) { i.Status.ActiveGeneration = 0 }), gens: twoOld, claim: claim},
		"its serving generation proven gone before":        {inst: served(), gens: []*v1.Generation{gone(gen(2, "g2"))}, claim: claim},
		"a generation of the new boot exists":              {inst: served(), gens: append(twoOld, gen(3, "new-3")), claim: claim},
		"its serving generation not on this node any more": {inst: served(), gens: []*v1.Generation{gone(gen(1, "g1"))}, claim: claim},
		"suspended": {inst: served(func(i *v1.Instance) { i.Spec.Suspend = true }), gens: twoOld, claim: claim},
		"being deleted": {inst: served(func(i *v1.Instance) { now := metav1.Now(); i.DeletionTimestamp = &now }),
			gens: twoOld, claim: claim},
		"no finalizer":             {inst: served(func(i *v1.Instance) { i.Finalizers = nil }), gens: twoOld, claim: claim},
		"placed on another node":   {inst: served(func(i *v1.Instance) { i.Spec.NodeName = "n2" }), gens: twoOld, claim: claim},
		"moving here from another": {inst: served(func(i *v1.Instance) { i.Status.NodeName = "n2" }), gens: twoOld, claim: claim},
		"socket-activated":         {inst: served(func(i *v1.Instance) { i.Spec.SocketActivation = &v1.SocketActivation{} }), gens: twoOld, claim: claim},
		"no key":                   {inst: served(func(i *v1.Instance) { i.Status.KeyFingerprint = "" }), gens: twoOld, claim: claim},
		"host not claimed":         {inst: served(), gens: twoOld},
		"host claimed by another":  {inst: served(), gens: twoOld, claim: &v1.HostClaim{Spec: v1.HostClaimSpec{UID: "other"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next, ok := servesAgain(tc.inst, tc.gens, tc.claim, node, oldBoot)
			if !ok {
				next = 0
			}
			if d := cmp.Diff(tc.want, next); d != "" {
				t.Errorf("servesAgain (-want +got):\n%s", d)
			}
		})
	}
}
