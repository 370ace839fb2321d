package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/join"
	"github.com/unitlet/unitlet/runtime/machine"
)

// armedGuard passes its one check.
type armedGuard struct{}

func (armedGuard) Check(context.Context) []join.Check {
	return []join.Check{{Name: "test", Passed: true, Message: "armed"}}
}
func (armedGuard) Prepare() error { return nil }

// startEnrollment runs node's Enrollment reconciler with capacity c in a
// manager of its own, whose cache holds node's Generations and Instances
// as the agent's does. Its re-check is an hour away: every later round
// is one a Generation's change started.
func startEnrollment(t *testing.T, node string, c *CapacityReport) {
	t.Helper()
	onNode := fields.OneTermEqualSelector(v1.FieldNodeName, node)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&v1.Instance{}: {Field: onNode}, &v1.Generation{}: {Field: onNode},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Cache = mgr.GetCache()
	r := &EnrollmentReconciler{
		Client: k8s, NodeName: node, Guard: armedGuard{}, Gate: &hostgate.Switch{},
		StartHosting: func() error { return nil }, Fatal: func(err error) { t.Errorf("fatal: %v", err) },
		Every: time.Hour, PrepareEvery: time.Hour, Log: testr.New(t), Capacity: c,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
}

// lists renders an Enrollment's three lists for comparisons.
func lists(st v1.EnrollmentStatus) string {
	render := func(l corev1.ResourceList) string {
		return fmt.Sprintf("memory=%s cpu=%s pids=%s", l.Memory(), l.Cpu(), l.Name(v1.ResourcePids, resource.DecimalSI))
	}
	return "capacity " + render(st.Capacity) + "; allocatable " + render(st.Allocatable) + "; allocated " + render(st.Allocated)
}

func waitLists(t *testing.T, node, want string) {
	t.Helper()
	testutil.Eventually(t, want, waitLimit, pollEvery, func() (bool, string) {
		var enr v1.Enrollment
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
			return false, err.Error()
		}
		got := lists(enr.Status)
		return got == want, got
	})
}

// capacityPod is a pod bound to node requesting mem and cpu.
func capacityPod(name, node, mem, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// capacityGeneration is generation n of inst on node with tier 256Mi,
// 500m, 64 pids.
func capacityGeneration(inst, node string, n int64) *v1.Generation {
	tmpl := instance(inst).Spec.Template
	tmpl.Tier = v1.Tier{Memory: resource.MustParse("256Mi"), CPU: resource.MustParse("500m"), Pids: 64}
	return &v1.Generation{ObjectMeta: metav1.ObjectMeta{Name: generationName(inst, n), Namespace: "default"},
		Spec: v1.GenerationSpec{Instance: inst, NodeName: node, Number: n, Template: tmpl}}
}

// TestEnrollmentCapacity: on a real API server the Enrollment reports the
// machine's capacity; allocatable lowered to the Node's allocatable, by
// the reserve and by the requests of the pods bound to the node (not by
// an ended one); allocated raised by a Generation, by an Overlap swap's
// overlap.memory while two run, and lowered again once one is proven
// gone. The rounds after the first are started by the Generations'
// changes alone.
func TestEnrollmentCapacity(t *testing.T) {
	const node = "node-cap"
	ctx := context.Background()
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}})
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	create(t, n)
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi"), corev1.ResourceCPU: resource.MustParse("4")}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	create(t, capacityPod("cap-web", node, "1Gi", "250m"))
	create(t, capacityPod("cap-elsewhere", "another-node", "2Gi", "1"))
	ended := capacityPod("cap-ended", node, "2Gi", "1")
	create(t, ended)
	ended.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Update(ctx, ended); err != nil {
		t.Fatal(err)
	}
	reserved := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("500m"), v1.ResourcePids: resource.MustParse("100")}
	startEnrollment(t, node, &CapacityReport{
		Machine: func() (machine.Capacity, error) {
			return machine.Capacity{MemoryBytes: 8 << 30, CPUMillis: 2000, Pids: 1000}, nil
		},
		Reserved: reserved, Debounce: 200 * time.Millisecond,
	})
	// Memory: min(8Gi, Node's 6Gi) - 512Mi - 1Gi; cpu: min(2, 4) - 500m - 250m.
	waitLists(t, node, "capacity memory=8Gi cpu=2 pids=1k; allocatable memory=4608Mi cpu=1250m pids=900; allocated memory=0 cpu=0 pids=0")

	// A new pod and a Generation: the Generation's round reads both.
	create(t, capacityPod("cap-batch", node, "512Mi", "250m"))
	inst := instance("cap-a", func(i *v1.Instance) {
		i.Spec.NodeName = node
		i.Spec.Overlap = &v1.Overlap{Memory: ptr.To(resource.MustParse("384Mi"))}
	})
	create(t, inst)
	create(t, capacityGeneration("cap-a", node, 1))
	waitLists(t, node, "capacity memory=8Gi cpu=2 pids=1k; allocatable memory=4Gi cpu=1 pids=900; allocated memory=256Mi cpu=500m pids=64")

	// An Overlap swap: two generations take overlap.memory while both hold.
	create(t, capacityGeneration("cap-a", node, 2))
	waitLists(t, node, "capacity memory=8Gi cpu=2 pids=1k; allocatable memory=4Gi cpu=1 pids=900; allocated memory=384Mi cpu=1 pids=128")

	// The old one proven gone: the raise ends.
	g1 := &v1.Generation{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: generationName("cap-a", 1)}, g1); err != nil {
		t.Fatal(err)
	}
	g1.Status.Phase = v1.PhaseRetired
	g1.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTerminated, Status: metav1.ConditionTrue, Reason: v1.ReasonProven,
		Message: "proven", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, g1); err != nil {
		t.Fatal(err)
	}
	waitLists(t, node, "capacity memory=8Gi cpu=2 pids=1k; allocatable memory=4Gi cpu=1 pids=900; allocated memory=256Mi cpu=500m pids=64")
}
