package capacity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/machine"
)

// milli compares resource lists by value (millis), whatever their format.
var milli = cmp.Transformer("milli", func(l corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(l))
	for name, q := range l {
		out[name] = q.MilliValue()
	}
	return out
})

// list builds a resource list of memory, cpu and pids from quantities
// ("" leaves one out).
func list(mem, cpu, pids string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpu, v1.ResourcePids: pids} {
		if v != "" {
			l[name] = resource.MustParse(v)
		}
	}
	return l
}

func TestFromMachine(t *testing.T) {
	got := FromMachine(machine.Capacity{MemoryBytes: 8 << 30, CPUMillis: 2000, Pids: 32768})
	if diff := cmp.Diff(list("8Gi", "2", "32768"), got, milli); diff != "" {
		t.Errorf("capacity (-want,+got):\n%s", diff)
	}
	if s := got.Memory().String(); s != "8Gi" {
		t.Errorf("memory reads %s, want 8Gi", s)
	}
}

func TestAllocatable(t *testing.T) {
	tests := map[string]struct {
		capacity, node, reserve, pods corev1.ResourceList
		want                          corev1.ResourceList
	}{
		"the whole machine": {
			capacity: list("8Gi", "2", "32768"),
			want:     list("8Gi", "2", "32768"),
		},
		"minus the reserve": {
			capacity: list("8Gi", "2", "32768"), reserve: list("512Mi", "500m", "1000"),
			want: list("7680Mi", "1500m", "31768"),
		},
		"minus the pods' requests": {
			capacity: list("8Gi", "2", "32768"), reserve: list("512Mi", "500m", "1000"), pods: list("1Gi", "250m", ""),
			want: list("6656Mi", "1250m", "31768"),
		},
		"the Node's allocatable below the machine lowers it": {
			capacity: list("8Gi", "2", "32768"), node: list("7Gi", "1800m", ""),
			want: list("7Gi", "1800m", "32768"),
		},
		"the Node's allocatable above the machine changes nothing": {
			capacity: list("8Gi", "2", "32768"), node: list("16Gi", "4", ""),
			want: list("8Gi", "2", "32768"),
		},
		"Node, reserve and pods together": {
			capacity: list("8Gi", "2", "32768"), node: list("7Gi", "1800m", ""), reserve: list("1Gi", "", "768"), pods: list("2Gi", "800m", ""),
			want: list("4Gi", "1", "32000"),
		},
		"never below zero": {
			capacity: list("1Gi", "1", "100"), reserve: list("2Gi", "", "200"), pods: list("", "3", ""),
			want: list("0", "0", "0"),
		},
		"a reserve in decimal units from binary capacity": {
			capacity: list("1Gi", "1", "100"), reserve: list("1G", "", ""),
			want: list("73741824", "1", "100"),
		},
		"a pod's other resources are ignored": {
			capacity: list("1Gi", "1", "100"), pods: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			want: list("1Gi", "1", "100"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Allocatable(tc.capacity, tc.node, tc.reserve, tc.pods)
			if diff := cmp.Diff(tc.want, got, milli); diff != "" {
				t.Errorf("allocatable (-want,+got):\n%s", diff)
			}
		})
	}
}

// gen is generation n of instance inst in namespace ns with tier
// (memory, cpu, pids), in phase, Terminated as given ("" none).
func gen(ns, inst string, n int64, mem, cpu string, pids int64, phase v1.GenerationPhase, terminated metav1.ConditionStatus) v1.Generation {
	g := v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: inst + "-g"},
		Spec: v1.GenerationSpec{Instance: inst, NodeName: "n", Number: n,
			Template: v1.Template{Tier: v1.Tier{Memory: resource.MustParse(mem), CPU: resource.MustParse(cpu), Pids: pids}}},
		Status: v1.GenerationStatus{Phase: phase}}
	if terminated != "" {
		g.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTerminated, Status: terminated, Reason: "R"}}
	}
	return g
}

func TestAllocated(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	tests := map[string]struct {
		gens    []v1.Generation
		overlap map[types.NamespacedName]string
		want    corev1.ResourceList
		// overlapping are the Instances Allocated asks overlap.memory of.
		overlapping []types.NamespacedName
	}{
		"nothing on the node": {
			want: list("0", "0", "0"),
		},
		"one running generation": {
			gens: []v1.Generation{gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRunning, "")},
			want: list("256Mi", "500m", "64"),
		},
		"pending, starting and failed ones still hold": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhasePending, ""),
				gen("ns", "b", 1, "128Mi", "250m", 32, v1.PhaseStarting, ""),
				gen("ns", "c", 1, "64Mi", "100m", 16, v1.PhaseFailed, metav1.ConditionFalse),
			},
			want: list("448Mi", "850m", "112"),
		},
		"proven gone holds nothing": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRetired, metav1.ConditionTrue),
				gen("ns", "b", 1, "128Mi", "250m", 32, v1.PhaseFailed, metav1.ConditionTrue),
				gen("ns", "c", 1, "64Mi", "100m", 16, v1.PhaseRetired, ""),
			},
			want: list("0", "0", "0"),
		},
		"retiring, not yet proven, still holds": {
			gens: []v1.Generation{gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRetiring, metav1.ConditionFalse)},
			want: list("256Mi", "500m", "64"),
		},
		"an overlap swap without overlap.memory: the sum of the tiers": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRunning, ""),
				gen("ns", "a", 2, "512Mi", "1", 128, v1.PhaseStarting, ""),
			},
			want:        list("768Mi", "1500m", "192"),
			overlapping: []types.NamespacedName{a},
		},
		"an overlap swap with overlap.memory: the raised parent": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRunning, ""),
				gen("ns", "a", 2, "256Mi", "500m", 64, v1.PhaseStarting, ""),
			},
			overlap:     map[types.NamespacedName]string{a: "384Mi"},
			want:        list("384Mi", "1", "128"),
			overlapping: []types.NamespacedName{a},
		},
		"overlap.memory is not counted for one generation": {
			gens:    []v1.Generation{gen("ns", "a", 2, "256Mi", "500m", 64, v1.PhaseRunning, "")},
			overlap: map[types.NamespacedName]string{a: "1Gi"},
			want:    list("256Mi", "500m", "64"),
		},
		"the swap's raise ends once the old one is proven gone": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRetired, metav1.ConditionTrue),
				gen("ns", "a", 2, "256Mi", "500m", 64, v1.PhaseRunning, ""),
			},
			overlap: map[types.NamespacedName]string{a: "384Mi"},
			want:    list("256Mi", "500m", "64"),
		},
		"same name in another namespace is another Instance": {
			gens: []v1.Generation{
				gen("ns", "a", 1, "256Mi", "500m", 64, v1.PhaseRunning, ""),
				gen("other", "a", 1, "256Mi", "500m", 64, v1.PhaseRunning, ""),
			},
			overlap: map[types.NamespacedName]string{a: "300Mi"},
			want:    list("512Mi", "1", "128"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			overlap := func(key types.NamespacedName) *resource.Quantity {
				if v, ok := tc.overlap[key]; ok {
					q := resource.MustParse(v)
					return &q
				}
				return nil
			}
			got := Allocated(tc.gens, overlap)
			if diff := cmp.Diff(tc.want, got, milli); diff != "" {
				t.Errorf("allocated (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.overlapping, Overlapping(tc.gens)); diff != "" {
				t.Errorf("overlapping (-want,+got):\n%s", diff)
			}
		})
	}
}
