package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// userGrant is a valid UserGrant; cases change one thing to make it bad.
func userGrant(name string) *v1.UserGrant {
	return &v1.UserGrant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.UserGrantSpec{
			User: "postgres", Namespaces: []string{"shop", "ledger"}, Nodes: []string{"node-a", "node-b.example.com"},
			SupplementaryGroups: []string{"ssl-cert"},
		},
	}
}

func TestUserGrantValidation(t *testing.T) {
	cases := map[string]struct {
		mutate func(*v1.UserGrant)
		want   string // a piece of the API server's message; "" accepted
	}{
		"valid":                       {func(*v1.UserGrant) {}, ""},
		"root, on every node":         {func(g *v1.UserGrant) { g.Spec.User, g.Spec.Nodes, g.Spec.SupplementaryGroups = "root", nil, nil }, ""},
		"no namespaces":               {func(g *v1.UserGrant) { g.Spec.Namespaces = nil }, "spec.namespaces: Required value"},
		"an empty list of namespaces": {func(g *v1.UserGrant) { g.Spec.Namespaces = []string{} }, "should have at least 1 items"},
		"a namespace with capitals":   {func(g *v1.UserGrant) { g.Spec.Namespaces = []string{"Shop"} }, "each namespace must be a namespace name"},
		"a namespace wildcard":        {func(g *v1.UserGrant) { g.Spec.Namespaces = []string{"*"} }, "each namespace must be a namespace name"},
		"a namespace twice":           {func(g *v1.UserGrant) { g.Spec.Namespaces = []string{"shop", "shop"} }, "Duplicate value"},
		"no user":                     {func(g *v1.UserGrant) { g.Spec.User = "" }, "spec.user in body should be at least 1 chars long"},
		"a user name with a colon":    {func(g *v1.UserGrant) { g.Spec.User = "post:gres" }, "user must be a valid user name"},
		"a numeric user":              {func(g *v1.UserGrant) { g.Spec.User = "0" }, "user must be a valid user name"},
		"a node name with capitals":   {func(g *v1.UserGrant) { g.Spec.Nodes = []string{"Node_A"} }, "each node must be a node name"},
		"a node twice":                {func(g *v1.UserGrant) { g.Spec.Nodes = []string{"node-a", "node-a"} }, "Duplicate value"},
		"the group root":              {func(g *v1.UserGrant) { g.Spec.SupplementaryGroups = []string{"video", "root"} }, "the group root (gid 0) is never granted"},
		"a group name with a space":   {func(g *v1.UserGrant) { g.Spec.SupplementaryGroups = []string{"ssl cert"} }, "each group must be a valid group name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := userGrant("grant-" + strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ",", ""))
			tc.mutate(g)
			err := k8s.Create(ctx(t), g)
			if err == nil {
				t.Cleanup(func() { _ = k8s.Delete(context.Background(), g) })
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid grant refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// A grant's user is fixed; what it grants, to whom and where, changes.
func TestUserGrantUpdate(t *testing.T) {
	g := userGrant("grant-updated")
	if err := k8s.Create(ctx(t), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), g) })
	updates := map[string]struct {
		mutate func(*v1.UserGrant)
		want   string
	}{
		"user changed":       {func(g *v1.UserGrant) { g.Spec.User = "root" }, "user is immutable"},
		"namespaces changed": {func(g *v1.UserGrant) { g.Spec.Namespaces = []string{"shop"} }, ""},
		"nodes removed":      {func(g *v1.UserGrant) { g.Spec.Nodes = nil }, ""},
	}
	for name, tc := range updates {
		t.Run(name, func(t *testing.T) {
			cur := &v1.UserGrant{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(g), cur); err != nil {
				t.Fatal(err)
			}
			tc.mutate(cur)
			err := k8s.Update(ctx(t), cur)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("update refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}
