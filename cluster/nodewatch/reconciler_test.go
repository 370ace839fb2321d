package nodewatch

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

var (
	k8s client.Client
	// cached reads as the agent does, from a manager's cache that may lag.
	cached client.Client
	// watcher sees every version of an object the API server stores.
	watcher client.WithWatch
)

const leaseNS = "unitlet-system"

func TestMain(m *testing.M) {
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		if watcher, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := (&Reconciler{Client: mgr.GetClient(), LeaseNamespace: leaseNS}).SetupWithManager(ctx, mgr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cached = mgr.GetClient()
		go func() { _ = mgr.Start(ctx) }()
		return m.Run()
	}()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

func instanceOn(name, node string) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.InstanceSpec{Host: name + ".example.com", NodeName: node, Strategy: v1.StrategyOverlap,
			Template: v1.Template{Command: []string{"/usr/bin/app"},
				Tier: v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32}}},
	}
}

func condition(t *testing.T, name, typ string) string {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
		return err.Error()
	}
	c := meta.FindStatusCondition(inst.Status.Conditions, typ)
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// A node no agent enrolled: its Instance is Reconciling=True/NoAgent. Once
// an agent enrolls it and renews its Lease, nodewatch writes nothing; once
// the Lease runs out, Ready=Unknown/NodeLost.
func TestNodeHealthOnInstances(t *testing.T) {
	const node = "watched-node"
	create(t, instanceOn("watched", node))
	testutil.Eventually(t, "NoAgent", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		c := condition(t, "watched", v1.ConditionReconciling)
		return c == "True/"+v1.ReasonNoAgent, c
	})

	create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}})
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: node},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(3)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	create(t, l)
	time.Sleep(time.Second)
	if c := condition(t, "watched", v1.ConditionReady); c != "absent" {
		t.Errorf("Ready = %s while the lease is fresh, want nodewatch to write none", c)
	}
	testutil.Eventually(t, "NodeLost once the lease runs out", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		c := condition(t, "watched", v1.ConditionReady)
		return c == "Unknown/"+v1.ReasonNodeLost, c
	})
	if c := condition(t, "watched", v1.ConditionReconciling); c != "True/"+v1.ReasonNodeLost {
		t.Errorf("Reconciling = %s, want True/NodeLost", c)
	}
}
