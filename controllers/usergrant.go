package controllers

import (
	"context"
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/identity"
)

// The agent reads every UserGrant (cluster-scoped, small, few) from its
// cache; it writes none, and tenants get no rights on them.
// +kubebuilder:rbac:groups=hosting.unitlet.dev,resources=usergrants,verbs=get;list;watch

// grantOf says whether grants let namespace ns run as user on node, and
// with what: the supplementary groups of every grant that names user,
// lists ns and holds on node, together. Root is a user like any other;
// only a grant naming "root" lets it be uid 0, so a grant of another name
// that turns out to be uid 0 (toor) does not.
func grantOf(grants []v1.UserGrant, ns, user, node string) (identity.Grant, bool) {
	if user == "" {
		return identity.Grant{}, false
	}
	var g identity.Grant
	found := false
	for i := range grants {
		spec := &grants[i].Spec
		if spec.User != user || !slices.Contains(spec.Namespaces, ns) || !holdsOn(&grants[i], node) {
			continue
		}
		found = true
		g.CloudMetadata = g.CloudMetadata || spec.CloudMetadata
		for _, grp := range spec.SupplementaryGroups {
			if !slices.Contains(g.Groups, grp) {
				g.Groups = append(g.Groups, grp)
			}
		}
	}
	if !found {
		return identity.Grant{}, false
	}
	g.User, g.Root = user, user == "root"
	slices.Sort(g.Groups)
	return g, true
}

// holdsOn: the grant lists node, or lists no node (every node).
func holdsOn(g *v1.UserGrant, node string) bool {
	return len(g.Spec.Nodes) == 0 || slices.Contains(g.Spec.Nodes, node)
}

// ReadGrant is what the grants in c say of user for namespace ns on
// node: the zero Grant (no named user) when none grants it. The
// reconcilers and the agent's one-off runs read it before each start.
func ReadGrant(ctx context.Context, c client.Reader, ns, user, node string) (identity.Grant, error) {
	if user == "" {
		return identity.Grant{}, nil
	}
	var list v1.UserGrantList
	if err := c.List(ctx, &list); err != nil {
		return identity.Grant{}, fmt.Errorf("read user grants: %w", err)
	}
	g, _ := grantOf(list.Items, ns, user, node)
	return g, nil
}

// instancesOfGrant maps a grant added, changed or removed (a change maps
// its old and new object both) to the Instances of its namespaces on
// this node that name its user: each is granted anew, or refused.
func (r *InstanceReconciler) instancesOfGrant(ctx context.Context, o client.Object) []reconcile.Request {
	g, ok := o.(*v1.UserGrant)
	if !ok || !holdsOn(g, r.NodeName) {
		return nil
	}
	var reqs []reconcile.Request
	for _, ns := range g.Spec.Namespaces {
		var list v1.InstanceList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			// The cache's list does not fail once synced; the recheck
			// (identityRecheck) covers a refused Instance regardless.
			ctrl.LoggerFrom(ctx).Error(err, "list Instances for a user grant", "grant", g.Name, "namespace", ns)
			continue
		}
		for _, inst := range list.Items {
			if inst.Spec.Template.User == g.Spec.User {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&inst)})
			}
		}
	}
	return reqs
}
