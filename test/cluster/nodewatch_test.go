package cluster

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/cluster"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// nodeWatch: the Deployment runs with the shipped RBAC; the real node's
// agent renews its Lease (its Instances untouched), an Instance placed on
// a node no agent enrolled reads Reconciling=True/NoAgent, and one on a
// node whose agent's Lease ran out reads Ready=Unknown/NodeLost.
func nodeWatch(t *testing.T) {
	ctx := context.Background()
	kubectl(t, "rollout", "status", "-n", "unitlet-system", "deploy/unitlet-nodewatch", "--timeout=4m")
	eventually(t, "the agent's Lease renewed", time.Minute, func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "unitlet-system", Name: cluster.NodeName}, l); err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 30*time.Second, l.Spec.RenewTime.String()
	})

	place := func(name, node string) {
		inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", node)
		inst.Name, inst.Spec.Host = name, name+".example.com"
		if err := k8s.Create(ctx, inst); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, inst) })
	}
	place("unwatched", "ghost-node")
	condition := func(name, typ string) string {
		i := kube.Instance(t, name)
		if c := meta.FindStatusCondition(i.Status.Conditions, typ); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "absent"
	}
	eventually(t, "Reconciling=True/NoAgent", time.Minute, func() (bool, string) {
		c := condition("unwatched", v1.ConditionReconciling)
		return c == "True/"+v1.ReasonNoAgent, c
	})

	enr := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "lost-node"}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "unitlet-system", Name: "lost-node"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("lost-node"), LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-2 * time.Minute)}}}
	for _, o := range []client.Object{enr, lease} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, o) })
	}
	place("stranded", "lost-node")
	eventually(t, "Ready=Unknown/NodeLost", time.Minute, func() (bool, string) {
		c := condition("stranded", v1.ConditionReady)
		return c == "Unknown/"+v1.ReasonNodeLost, c
	})
	if c := condition("shop", v1.ConditionReady); c != "True/"+v1.ReasonReconciled {
		t.Errorf("shop on the live node: Ready = %s, want True/Reconciled", c)
	}
}
