package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/identity"
)

func userGrant(name, user string, namespaces, nodes, groups []string) v1.UserGrant {
	return v1.UserGrant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.UserGrantSpec{User: user, Namespaces: namespaces, Nodes: nodes, SupplementaryGroups: groups}}
}

// TestGrantOf is the pure decision: is user granted to namespace ns on
// node, and with which groups.
func TestGrantOf(t *testing.T) {
	grants := []v1.UserGrant{
		userGrant("pg-shop", "postgres", []string{"shop", "ledger"}, []string{"node-a"}, []string{"ssl-cert"}),
		userGrant("pg-shop-b", "postgres", []string{"shop"}, []string{"node-b"}, nil),
		userGrant("pg-shop-video", "postgres", []string{"shop"}, nil, []string{"video", "ssl-cert"}),
		userGrant("root-ops", "root", []string{"ops"}, []string{"node-a"}, nil),
		userGrant("toor-ops", "toor", []string{"ops"}, []string{"node-a"}, nil),
		userGrant("metrics-ops", "metrics", []string{"ops"}, nil, nil),
		userGrant("metrics-ops-cloud", "metrics", []string{"ops"}, []string{"node-a"}, nil),
	}
	grants[len(grants)-1].Spec.CloudMetadata = true
	tests := map[string]struct {
		ns, user, node string
		want           identity.Grant
		wantOK         bool
	}{
		"no user needs no grant": {ns: "shop", node: "node-a"},
		"granted on a listed node, groups of every grant together": {ns: "shop", user: "postgres", node: "node-a",
			want: identity.Grant{User: "postgres", Groups: []string{"ssl-cert", "video"}}, wantOK: true},
		"a grant with no nodes holds on every node": {ns: "shop", user: "postgres", node: "node-z",
			want: identity.Grant{User: "postgres", Groups: []string{"ssl-cert", "video"}}, wantOK: true},
		"another namespace of the list": {ns: "ledger", user: "postgres", node: "node-a",
			want: identity.Grant{User: "postgres", Groups: []string{"ssl-cert"}}, wantOK: true},
		"a listed namespace on a node it does not list": {ns: "ledger", user: "postgres", node: "node-b"},
		"a namespace no grant lists":                    {ns: "tenant", user: "postgres", node: "node-a"},
		"a user no grant names":                         {ns: "shop", user: "www-data", node: "node-a"},
		"root granted to its namespace and node": {ns: "ops", user: "root", node: "node-a",
			want: identity.Grant{User: "root", Root: true}, wantOK: true},
		"root is never node-wide: another namespace": {ns: "shop", user: "root", node: "node-a"},
		"root on another node":                       {ns: "ops", user: "root", node: "node-b"},
		"another name is not root": {ns: "ops", user: "toor", node: "node-a",
			want: identity.Grant{User: "toor"}, wantOK: true},
		"the metadata service where one grant allows it": {ns: "ops", user: "metrics", node: "node-a",
			want: identity.Grant{User: "metrics", CloudMetadata: true}, wantOK: true},
		"not where only the grant without it holds": {ns: "ops", user: "metrics", node: "node-b",
			want: identity.Grant{User: "metrics"}, wantOK: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := grantOf(grants, tc.ns, tc.user, tc.node)
			if ok != tc.wantOK {
				t.Errorf("granted = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("grant (-want,+got):\n%s", diff)
			}
		})
	}
}
