package placement

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
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

const (
	leaseNS = "unitlet-system"
	// clusterSA is the cluster side's service account (config/nodewatch).
	clusterSA = testenv.ClusterSideUser
)

// impersonating is env's config acting as user in groups.
func impersonating(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// TestMain starts a control plane with the cluster side's credentials
// (config/nodewatch) and its placement controller running as its
// service account, as in a cluster: what RBAC and the policies refuse it
// shows here.
func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		cfg, err := env.AsClusterSide(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("unitlet-placement"), LeaseNamespace: leaseNS}
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = mgr.Start(ctx) }()
		return m.Run()
	}()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// enroll creates a hosting, approved Enrollment of node with allocatable
// alloc, and its Lease renewed at renewed for 40 s (time.Now() for a live
// node); edit changes the Enrollment before it is written.
func enroll(t *testing.T, name string, alloc corev1.ResourceList, renewed time.Time, edit func(*v1.Enrollment)) {
	t.Helper()
	create(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime: &metav1.MicroTime{Time: renewed}}})
	e := &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.EnrollmentSpec{Approved: true}}
	if edit != nil {
		edit(e)
	}
	status := e.Status
	create(t, e)
	e.Status = status
	e.Status.Mode, e.Status.Allocatable = v1.ModeHosting, alloc
	if err := k8s.Status().Update(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func newInstance(name, node string, edit func(*v1.Instance)) *v1.Instance {
	i := &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: v1.InstanceSpec{Host: name + ".example.com", NodeName: node, Strategy: v1.StrategyOverlap,
			Template: v1.Template{Command: []string{"/usr/bin/app"},
				Tier: v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32}}},
	}
	if edit != nil {
		edit(i)
	}
	return i
}

func get(t *testing.T, name string) *v1.Instance {
	t.Helper()
	i := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, i); err != nil {
		t.Fatal(err)
	}
	return i
}

// scheduled is the Instance's node and its Scheduled condition, as
// "node status/reason: message".
func scheduled(t *testing.T, name string) string {
	i := get(t, name)
	c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionScheduled)
	if c == nil {
		return i.Spec.NodeName + " (no Scheduled)"
	}
	return fmt.Sprintf("%s %s/%s: %s", i.Spec.NodeName, c.Status, c.Reason, c.Message)
}
