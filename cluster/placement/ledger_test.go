package placement

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

func inst(uid, spec, status string) v1.Instance {
	return v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "shop", UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Spec: v1.InstanceSpec{NodeName: spec, Template: v1.Template{
			Tier: v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32}}},
		Status: v1.InstanceStatus{NodeName: status},
	}
}

// names is node -> how many Instances are counted there.
func names(m map[string][]Bound) map[string]int {
	out := map[string]int{}
	for n, bs := range m {
		out[n] = len(bs)
	}
	return out
}

func TestLedgerBoundByNode(t *testing.T) {
	tests := map[string]struct {
		assume  map[string]string // uid -> node
		insts   []v1.Instance
		want    map[string]int
		pending int // assumptions left
	}{
		"spec.nodeName counts; unplaced counts nowhere": {
			insts: []v1.Instance{inst("a", "n1", "n1"), inst("b", "n1", ""), inst("c", "", "")},
			want:  map[string]int{"n1": 2},
		},
		"a moving Instance counts on both nodes": {
			insts: []v1.Instance{inst("a", "n2", "n1")},
			want:  map[string]int{"n1": 1, "n2": 1},
		},
		"an assumed binding counts before the cache shows it, and is kept": {
			assume:  map[string]string{"c": "n3"},
			insts:   []v1.Instance{inst("c", "", "")},
			want:    map[string]int{"n3": 1},
			pending: 1,
		},
		"an assumed move counts on the target, the serving node still counts": {
			assume:  map[string]string{"a": "n2"},
			insts:   []v1.Instance{inst("a", "n1", "n1")},
			want:    map[string]int{"n1": 1, "n2": 1},
			pending: 1,
		},
		"seen in the cache: forgotten, counted once": {
			assume: map[string]string{"c": "n3"},
			insts:  []v1.Instance{inst("c", "n3", "")},
			want:   map[string]int{"n3": 1},
		},
		"gone from the cache: forgotten": {
			assume: map[string]string{"gone": "n3"},
			insts:  []v1.Instance{inst("a", "n1", "")},
			want:   map[string]int{"n1": 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var l Ledger
			for uid, n := range tc.assume {
				l.Assume(types.UID(uid), n)
			}
			got := names(l.BoundByNode(tc.insts, DefaultSpreadLabel))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BoundByNode (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.pending, l.Assumed()); diff != "" {
				t.Errorf("assumptions left (-want,+got):\n%s", diff)
			}
		})
	}
}

// BenchmarkBind1000Over50 places 1,000 Instances on 50 nodes, one at a
// time as the controller does: count what is bound from the cache's
// Instances plus the ledger (the cache never catching up here, the worst
// case for the ledger), Decide, Assume.
func BenchmarkBind1000Over50(b *testing.B) {
	const nInst, nNodes = 1000, 50
	nodes := make([]Node, nNodes)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%02d", i), res("64Gi", "32", 100000), labeled("zone", fmt.Sprint(i%3)))
	}
	insts := make([]v1.Instance, nInst)
	for i := range insts {
		insts[i] = inst(fmt.Sprintf("i-%04d", i), "", "")
		insts[i].Labels["app"] = fmt.Sprintf("app-%d", i%40)
	}
	b.ReportAllocs()
	for b.Loop() {
		var l Ledger
		for i := range insts {
			byNode := l.BoundByNode(insts, DefaultSpreadLabel)
			for j := range nodes {
				nodes[j].Bound = byNode[nodes[j].Enrollment.Name]
			}
			in := &insts[i]
			d := Decide(Request{Namespace: in.Namespace, Spread: in.Labels["app"], Demand: Demand(in)}, nodes)
			if d.Node == "" {
				b.Fatalf("instance %d unplaced: %s", i, d.Message)
			}
			l.Assume(in.UID, d.Node)
		}
		if l.Assumed() != nInst {
			b.Fatalf("%d assumed, want %d", l.Assumed(), nInst)
		}
	}
	b.ReportMetric(float64(nInst)*float64(b.N)/b.Elapsed().Seconds(), "binds/s")
}

// TestSpreadOver50: the benchmark's placement spreads: no node holds
// more than one Instance more than another.
func TestSpreadOver50(t *testing.T) {
	nodes := make([]Node, 50)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%02d", i), res("64Gi", "32", 100000))
	}
	var l Ledger
	insts := make([]v1.Instance, 1000)
	for i := range insts {
		insts[i] = inst(fmt.Sprintf("i-%04d", i), "", "")
	}
	for i := range insts {
		byNode := l.BoundByNode(insts, DefaultSpreadLabel)
		for j := range nodes {
			nodes[j].Bound = byNode[nodes[j].Enrollment.Name]
		}
		d := Decide(Request{Namespace: "shop", Spread: "web", Demand: Demand(&insts[i])}, nodes)
		l.Assume(insts[i].UID, d.Node)
	}
	var counts []int
	for _, bs := range l.BoundByNode(insts, DefaultSpreadLabel) {
		counts = append(counts, len(bs))
	}
	sort.Ints(counts)
	if len(counts) != 50 || counts[0] != 20 || counts[49] != 20 {
		t.Errorf("1000 Instances over 50 nodes: per-node counts %v, want 20 each", counts)
	}
}
