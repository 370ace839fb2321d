package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// res is a resource list of memory, cpu and pids.
func res(mem, cpu string, pids int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourcePids:       *resource.NewQuantity(pids, resource.DecimalSI),
	}
}

// node is an approved, hosting node with allocatable alloc; edit changes
// it.
func node(name string, alloc corev1.ResourceList, edit ...func(*Node)) Node {
	n := Node{Enrollment: &v1.Enrollment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.EnrollmentSpec{Approved: true},
		Status:     v1.EnrollmentStatus{Mode: v1.ModeHosting, Allocatable: alloc},
	}}
	for _, e := range edit {
		e(&n)
	}
	return n
}

func cordoned(n *Node)   { n.Enrollment.Spec.Unschedulable = true }
func unapproved(n *Node) { n.Enrollment.Spec.Approved = false }
func joining(n *Node)    { n.Enrollment.Status.Mode = v1.ModeJoining }
func lost(n *Node)       { n.Lost = true }
func labeled(kv ...string) func(*Node) {
	return func(n *Node) {
		n.Enrollment.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Enrollment.Labels[kv[i]] = kv[i+1]
		}
	}
}
func bound(b ...Bound) func(*Node) { return func(n *Node) { n.Bound = append(n.Bound, b...) } }
func allocated(r corev1.ResourceList) func(*Node) {
	return func(n *Node) { n.Enrollment.Status.Allocated = r }
}

var (
	big   = res("4Gi", "4", 4000)
	small = res("64Mi", "100m", 32)
	// web is a request of the tier small, app=web in namespace shop.
	web = Request{Namespace: "shop", Spread: "web", Demand: small}
)

func TestDecideFilters(t *testing.T) {
	tests := map[string]struct {
		req   Request
		nodes []Node
		want  Decision
	}{
		"no node enrolled": {
			req:  web,
			want: Decision{Message: "0/0 nodes are available: no node is enrolled."},
		},
		"one of each failure, counted as the kube-scheduler does": {
			req: Request{Namespace: "shop", Demand: res("1Gi", "100m", 32), NodeSelector: map[string]string{"zone": "a"}},
			nodes: []Node{
				node("cordoned", big, cordoned, labeled("zone", "a")),
				node("full-1", res("512Mi", "4", 4000), labeled("zone", "a")),
				node("full-2", res("512Mi", "4", 4000), labeled("zone", "a")),
				node("elsewhere", big, labeled("zone", "b")),
			},
			want: Decision{Message: "0/4 nodes are available: 1 node is cordoned, 1 node didn't match the node selector, 2 nodes have insufficient memory."},
		},
		"unapproved, joining, lost and unreported are not chosen": {
			req: web,
			nodes: []Node{
				node("a", big, unapproved), node("b", big, joining), node("c", big, lost), node("d", nil),
			},
			want: Decision{Message: "0/4 nodes are available: 1 node is not approved, 1 node is not hosting, 1 node is lost, 1 node has not reported its allocatable."},
		},
		"a move's source is not chosen, though it fits best": {
			req:   Request{Namespace: "shop", Demand: small, Exclude: "a"},
			nodes: []Node{node("a", big), node("b", big, bound(Bound{Demand: AmountsOf(res("1Gi", "1", 1000))}))},
			want:  Decision{Node: "b", Scores: []Score{{Node: "b", LeastAllocated: 73, Spread: 100}}},
		},
		"only the source: unavailable": {
			req:   Request{Demand: small, Exclude: "a"},
			nodes: []Node{node("a", big)},
			want:  Decision{Message: "0/1 nodes are available: 1 node is the one it moves from."},
		},
		"a selector matches a node carrying more labels": {
			req: Request{Demand: small, NodeSelector: map[string]string{"zone": "a"}},
			nodes: []Node{
				node("plain", big), node("zoned", big, labeled("zone", "a", "disk", "ssd")),
			},
			want: Decision{Node: "zoned", Scores: []Score{{Node: "zoned", LeastAllocated: 98, Spread: 100}}},
		},
		"every key of a selector must match": {
			req:   Request{Demand: small, NodeSelector: map[string]string{"zone": "a", "disk": "nvme"}},
			nodes: []Node{node("zoned", big, labeled("zone", "a", "disk", "ssd"))},
			want:  Decision{Message: "0/1 nodes are available: 1 node didn't match the node selector."},
		},
		"short of cpu and pids at once counts under both": {
			req:   Request{Demand: res("64Mi", "2", 200)},
			nodes: []Node{node("a", res("4Gi", "1", 100))},
			want:  Decision{Message: "0/1 nodes are available: 1 node has insufficient cpu, 1 node has insufficient pids."},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.req, tc.nodes)); diff != "" {
				t.Errorf("Decide (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecideCapacity(t *testing.T) {
	tests := map[string]struct {
		req  Request
		node Node
		want string // the chosen node, or the message
	}{
		"exact fit": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("1Gi", "1", 100))})),
			want: "a",
		},
		"one byte over": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("1073741825", "1", 100))})),
			want: "0/1 nodes are available: 1 node has insufficient memory.",
		},
		"one millicore over": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("1Gi", "1001m", 100))})),
			want: "0/1 nodes are available: 1 node has insufficient cpu.",
		},
		"one pid over": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("1Gi", "1", 101))})),
			want: "0/1 nodes are available: 1 node has insufficient pids.",
		},
		"zero allocatable": {
			req:  Request{Demand: small},
			node: node("a", res("0", "0", 0)),
			want: "0/1 nodes are available: 1 node has insufficient memory, 1 node has insufficient cpu, 1 node has insufficient pids.",
		},
		"allocatable lacking pids has none": {
			req:  Request{Demand: small},
			node: node("a", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1")}),
			want: "0/1 nodes are available: 1 node has insufficient pids.",
		},
		"the agent's allocated counts when above what is bound": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("512Mi", "1", 100))}), allocated(res("1536Mi", "1", 100))),
			want: "0/1 nodes are available: 1 node has insufficient memory.",
		},
		"the agent's allocated below what is bound does not free room": {
			req:  Request{Demand: res("1Gi", "1", 100)},
			node: node("a", res("2Gi", "2", 200), bound(Bound{Demand: AmountsOf(res("1536Mi", "1", 100))}), allocated(res("0", "0", 0))),
			want: "0/1 nodes are available: 1 node has insufficient memory.",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.req, []Node{tc.node})
			got := d.Node
			if got == "" {
				got = d.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecideScores(t *testing.T) {
	sameApp := Bound{Namespace: "shop", Spread: "web", Demand: AmountsOf(small)}
	tests := map[string]struct {
		req   Request
		nodes []Node
		want  []Score
	}{
		"least allocated first": {
			req:   Request{Demand: small},
			nodes: []Node{node("busy", big, bound(Bound{Demand: AmountsOf(res("2Gi", "2", 2000))})), node("idle", big)},
			want:  []Score{{Node: "idle", LeastAllocated: 98, Spread: 100}, {Node: "busy", LeastAllocated: 48, Spread: 100}},
		},
		"a larger node with the same load is less allocated": {
			req: Request{Demand: small},
			nodes: []Node{
				node("small", res("1Gi", "1", 1000), bound(Bound{Demand: AmountsOf(res("512Mi", "500m", 500))})),
				node("large", res("2Gi", "2", 2000), bound(Bound{Demand: AmountsOf(res("512Mi", "500m", 500))})),
			},
			want: []Score{{Node: "large", LeastAllocated: 71, Spread: 100}, {Node: "small", LeastAllocated: 43, Spread: 100}},
		},
		"spread: the node without the owner's Instance wins at equal load": {
			req: web,
			nodes: []Node{
				node("a", big, bound(sameApp)),
				node("b", big, bound(Bound{Namespace: "shop", Spread: "db", Demand: AmountsOf(small)})),
			},
			want: []Score{{Node: "b", LeastAllocated: 96, Spread: 100}, {Node: "a", LeastAllocated: 96, Spread: 0}},
		},
		"spread counts the namespace: another namespace's web does not count": {
			req: web,
			nodes: []Node{
				node("a", big, bound(Bound{Namespace: "other", Spread: "web", Demand: AmountsOf(small)})),
				node("b", big, bound(sameApp)),
			},
			want: []Score{{Node: "a", LeastAllocated: 96, Spread: 100}, {Node: "b", LeastAllocated: 96, Spread: 0}},
		},
		"spread is proportional to the most on one node": {
			req: web,
			nodes: []Node{
				node("a", res("64Gi", "64", 64000), bound(sameApp, sameApp)),
				node("b", res("64Gi", "64", 64000), bound(sameApp)),
				node("c", res("64Gi", "64", 64000)),
			},
			want: []Score{{Node: "c", LeastAllocated: 99, Spread: 100}, {Node: "b", LeastAllocated: 99, Spread: 50}, {Node: "a", LeastAllocated: 99, Spread: 0}},
		},
		"no spread label: spread scores all alike": {
			req:   Request{Namespace: "shop", Demand: small},
			nodes: []Node{node("a", big, bound(sameApp)), node("b", big)},
			want:  []Score{{Node: "b", LeastAllocated: 98, Spread: 100}, {Node: "a", LeastAllocated: 96, Spread: 100}},
		},
		"ties go to the first name, whatever the order given": {
			req:   web,
			nodes: []Node{node("c", big), node("a", big), node("b", big)},
			want:  []Score{{Node: "a", LeastAllocated: 98, Spread: 100}, {Node: "b", LeastAllocated: 98, Spread: 100}, {Node: "c", LeastAllocated: 98, Spread: 100}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.req, tc.nodes)
			if diff := cmp.Diff(tc.want, d.Scores); diff != "" {
				t.Errorf("Decide's scores (-want,+got):\n%s", diff)
			}
			if d.Node != tc.want[0].Node {
				t.Errorf("Decide chose %q, want %q", d.Node, tc.want[0].Node)
			}
		})
	}
}
