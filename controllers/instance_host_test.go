package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// claimOf is host's claim held by the Instance ns/name (uid) on node.
func claimOf(host, ns, name string, uid types.UID, node string) *v1.HostClaim {
	return &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: host},
		Spec: v1.HostClaimSpec{Namespace: ns, Name: name, UID: uid, NodeName: node}}
}

func TestDecideClaim(t *testing.T) {
	inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "shop", UID: "u-shop"}}
	inst.Spec.Host, inst.Spec.NodeName = "shop.example.com", "n1"
	tests := map[string]struct {
		claim      *v1.HostClaim
		holderGone bool
		want       claimState
	}{
		"no claim: free":                         {want: claimFree},
		"its own claim":                          {claim: claimOf("shop.example.com", "a", "shop", "u-shop", "n1"), want: claimMine},
		"another's on its node":                  {claim: claimOf("shop.example.com", "b", "other", "u-other", "n1"), want: claimTaken},
		"another's on another node":              {claim: claimOf("shop.example.com", "b", "other", "u-other", "n2"), want: claimTaken},
		"its node, the holder gone: stale":       {claim: claimOf("shop.example.com", "b", "other", "u-other", "n1"), holderGone: true, want: claimStale},
		"another node, the holder gone: taken":   {claim: claimOf("shop.example.com", "b", "other", "u-other", "n2"), holderGone: true, want: claimTaken},
		"same name, an earlier UID: stale":       {claim: claimOf("shop.example.com", "a", "shop", "u-earlier", "n1"), holderGone: true, want: claimStale},
		"its own claim, made on its node before": {claim: claimOf("shop.example.com", "a", "shop", "u-shop", "n1"), holderGone: true, want: claimMine},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decideClaim(inst, tc.claim, tc.holderGone)); diff != "" {
				t.Errorf("decideClaim (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReleasable(t *testing.T) {
	inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "shop", UID: "u-shop"}}
	inst.Spec.Host = "new.example.com"
	claims := []v1.HostClaim{
		*claimOf("new.example.com", "a", "shop", "u-shop", "n1"),
		*claimOf("old.example.com", "a", "shop", "u-shop", "n1"),
		*claimOf("other.example.com", "b", "other", "u-other", "n1"),
		// Made from the node it was on before a move: not this node's to
		// release.
		*claimOf("moved.example.com", "a", "shop", "u-shop", "n0"),
	}
	tests := map[string]struct {
		gens []gb
		want []string
	}{
		"the old host's generation still runs": {
			gens: []gb{generation(1, "h").host("old.example.com").ready(), generation(2, "h").host("new.example.com").ready()},
		},
		"the old host's generation retired, not proven gone": {
			gens: []gb{generation(1, "h").host("old.example.com").retired(RetiredSuperseded), generation(2, "h").host("new.example.com").ready()},
		},
		"the old host's generation proven gone": {
			gens: []gb{generation(1, "h").host("old.example.com").retired(RetiredSuperseded).gone(), generation(2, "h").host("new.example.com").ready()},
			want: []string{"old.example.com"},
		},
		"a generation of unknown host still runs": {
			gens: []gb{generation(1, "h").ready()},
		},
		"no generation": {
			want: []string{"old.example.com"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var gens []*v1.Generation
			for _, b := range tc.gens {
				gens = append(gens, b.g)
			}
			var got []string
			for _, c := range releasable(formerClaims(claims, inst, "n1"), gens) {
				got = append(got, c.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("released (-want,+got):\n%s", diff)
			}
		})
	}
}

// The refusal tells an Instance's owner that the host is taken, never by
// whom: no namespace or Instance of the holder appears in it.
func TestHostInUseMessage(t *testing.T) {
	serving := generation(3, "h").host("old.example.com").ready().g
	tests := map[string]struct {
		serving *v1.Generation
		want    string
	}{
		"nothing serves": {
			want: "host shop.example.com is held by another Instance: nothing of it starts until that one releases it or spec.host changes",
		},
		"a former host still served": {
			serving: serving,
			want:    "host shop.example.com is held by another Instance: nothing of it starts until that one releases it or spec.host changes; generation 3 keeps serving host old.example.com",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := hostInUseMessage("shop.example.com", tc.serving)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("message (-want,+got):\n%s", diff)
			}
			if strings.Contains(got, "/") {
				t.Errorf("message %q names a namespace/name", got)
			}
		})
	}
}

// listByHost fails t when a List asks for more than the Instances the
// host index names for host: one claim event must not copy every
// Instance to filter them by hand (on a node of N, N events make N²).
func listByHost(t *testing.T, host string) func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
	return func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		sel := (&client.ListOptions{}).ApplyOptions(opts).FieldSelector
		if sel == nil {
			t.Errorf("listed %T without a field selector, want %s=%s", list, indexInstanceHost, host)
		} else if v, ok := sel.RequiresExactMatch(indexInstanceHost); !ok || v != host {
			t.Errorf("listed %T with field selector %q, want %s=%s", list, sel, indexInstanceHost, host)
		}
		return c.List(ctx, list, opts...)
	}
}

func TestClaimants(t *testing.T) {
	onNode := func(node string) func(*v1.Instance) { return func(i *v1.Instance) { i.Spec.NodeName = node } }
	withHost := func(h string) func(*v1.Instance) { return func(i *v1.Instance) { i.Spec.Host = h } }
	tests := map[string]struct {
		instances []*v1.Instance
		want      []reconcile.Request
	}{
		"none names the host": {instances: []*v1.Instance{instance("a"), instance("b")}},
		"the node's Instance naming it": {
			instances: []*v1.Instance{instance("a"), instance("b", withHost("shop.example.com"))},
			want:      []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "default", Name: "b"}}},
		},
		"another node's is not this agent's to wake": {
			instances: []*v1.Instance{instance("b", withHost("shop.example.com"), onNode("elsewhere"))},
		},
		"every one waiting for it": {
			instances: []*v1.Instance{instance("b", withHost("shop.example.com")), instance("c", withHost("shop.example.com"))},
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "default", Name: "b"}},
				{NamespacedName: types.NamespacedName{Namespace: "default", Name: "c"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := crfake.NewClientBuilder().WithScheme(scheme.New()).WithIndex(&v1.Instance{}, indexInstanceHost, instanceHost).
				WithInterceptorFuncs(interceptor.Funcs{List: listByHost(t, "shop.example.com")})
			for _, i := range tc.instances {
				b = b.WithObjects(i)
			}
			r := &InstanceReconciler{Client: b.Build(), NodeName: testNode}
			got := r.claimants(context.Background(), claimOf("shop.example.com", "default", "b", "u-b", testNode))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claimants (-want,+got):\n%s", diff)
			}
		})
	}
}
