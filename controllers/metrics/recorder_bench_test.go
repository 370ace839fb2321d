package metrics

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// benchInstances is issue 32's memory target's scale: 1000 Instances on
// one node.
const benchInstances = 1000

// What the agent writes on an Instance (controllers/instance_status.go,
// instance_ready.go; Scheduled by the cluster side's placement): settled
// is serving and proven; creating is every Instance mid-create, the worst
// moment of a mass create. Reconciling and Stalled are left out while
// they do not hold.
var benchConditions = map[string][]metav1.Condition{
	"settled": {
		{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonReconciled},
		{Type: v1.ConditionStartUncertain, Status: metav1.ConditionFalse, Reason: v1.ReasonCertain},
		{Type: v1.ConditionKillUnproven, Status: metav1.ConditionFalse, Reason: v1.ReasonProven},
		{Type: v1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: v1.ReasonBound},
	},
	"creating": {
		{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonProgressing},
		{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonProgressing},
		{Type: v1.ConditionStartUncertain, Status: metav1.ConditionFalse, Reason: v1.ReasonCertain},
		{Type: v1.ConditionKillUnproven, Status: metav1.ConditionFalse, Reason: v1.ReasonProven},
		{Type: v1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: v1.ReasonBound},
	},
}

// BenchmarkRecorderInstances measures what a recorder holds for 1000
// Instances: live heap after a GC (the recorder, its vectors and their
// series) and the per-Instance series a scrape would serve. Each case is
// the states every Instance goes through, in order: created-then-settled
// is a node after a mass create, where what the create's series left
// behind (maps do not shrink) still counts.
//
//	go test ./controllers/metrics/ -run '^$' -bench RecorderInstances -benchtime 5x
func BenchmarkRecorderInstances(b *testing.B) {
	cases := []struct {
		name   string
		states []string
	}{
		{"settled", []string{"settled"}},
		{"creating", []string{"creating"}},
		{"created-then-settled", []string{"creating", "settled"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var fp footprint
			for range b.N {
				fp = recorderFootprint(b, c.states)
			}
			b.ReportMetric(fp.heap, "heap-bytes")
			b.ReportMetric(fp.heap/benchInstances, "heap-bytes/instance")
			b.ReportMetric(fp.series, "series")
			b.ReportMetric(fp.scrape, "scrape-alloc-bytes")
		})
	}
}

// footprint is what a recorder of benchInstances Instances costs: the
// live heap it adds, its per-Instance series, and what one Gather (a
// scrape) allocates on top.
type footprint struct{ heap, series, scrape float64 }

func recorderFootprint(b *testing.B, states []string) footprint {
	b.Helper()
	before := liveHeap()
	reg := prometheus.NewRegistry()
	r, err := newRecorder(reg)
	if err != nil {
		b.Fatal(err)
	}
	for _, state := range states {
		for i := range benchInstances {
			r.setInstanceConditions("bench", fmt.Sprintf("app-%04d", i), benchConditions[state])
		}
	}
	after := liveHeap()
	runtime.KeepAlive(r)

	allocated := totalAlloc()
	fams, err := reg.Gather()
	fp := footprint{heap: float64(after) - float64(before), scrape: float64(totalAlloc() - allocated)}
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == NameInstanceCondition || f.GetName() == NameInstanceSuspended {
			fp.series += float64(len(f.GetMetric()))
		}
	}
	return fp
}

// liveHeap is the heap in use by reachable objects.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// totalAlloc is every byte the heap has handed out so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
