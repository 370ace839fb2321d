package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/node"
)

// identityRecheck is how often an Instance whose user the node refuses
// looks again: a grant's change wakes it at once (the watch), a user
// added to the node does not.
const identityRecheck = 10 * time.Second

// checkIdentity stops the reconcile, noting why, when the node will not
// run the template's user: no UserGrant grants it to the namespace on
// this node, or the account is one no grant gives, or the template asks
// for the cloud metadata service its grant does not allow. Nothing starts then
// (seed, sidecars, generations); what already runs keeps running, as a
// kubelet keeps a running pod whose admission would now fail: a grant
// removed stops new starts, and the Instance's owner or an administrator
// ends what runs (empty user, or delete the Instance). Another error (the
// node's user database unreadable) is returned as it is.
func (r *InstanceReconciler) checkIdentity(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	refused, err := s.identityRefused(ctx)
	if refused || err != nil {
		return s.stop(ctrl.Result{RequeueAfter: identityRecheck}, err)
	}
	return ctrl.Result{}, nil
}

func (s *instanceScope) identityRefused(ctx context.Context) (bool, error) {
	user, ns, nodeName := s.inst.Spec.Template.User, s.inst.Namespace, s.r.NodeName
	g, err := ReadGrant(ctx, s.r.Client, ns, user, nodeName)
	if err != nil {
		return false, err
	}
	_, err = s.r.Runtime.Identity(node.InstanceRef{Namespace: ns, Name: s.inst.Name}, user, g)
	if err == nil && s.inst.Spec.Template.AllowsCloudMetadata() && !g.CloudMetadata {
		err = node.ErrMetadataNotGranted
	}
	if err == nil {
		return false, nil
	}
	if n, ok := identityNote(err, user, ns, nodeName); ok {
		s.note = n
		return true, nil
	}
	return false, fmt.Errorf("identity of %s/%s: %w", ns, s.inst.Name, err)
}

// identityNote is the Stalled note for a user the node refuses; false
// for another error. A user not granted is refused before the node's
// user database is read, so its note says nothing of the account.
func identityNote(err error, user, ns, nodeName string) (note, bool) {
	const ownUID = "leave spec.template.user empty to run as the Instance's own uid"
	var reason, msg string
	switch {
	case errors.Is(err, identity.ErrNotGranted):
		reason = v1.ReasonUserNotGranted
		msg = fmt.Sprintf("spec.template.user %s is not granted to namespace %s on node %s: %s, "+
			"or a cluster administrator grants it with a UserGrant (cluster-scoped), e.g. kubectl apply -f - <<<"+
			"'{\"apiVersion\":\"hosting.unitlet.dev/v1alpha1\",\"kind\":\"UserGrant\",\"metadata\":{\"name\":\"%s-%s\"},"+
			"\"spec\":{\"user\":\"%s\",\"namespaces\":[\"%s\"],\"nodes\":[\"%s\"]}}'",
			user, ns, nodeName, ownUID, user, ns, user, ns, nodeName)
	case errors.Is(err, identity.ErrRootRefused):
		reason = v1.ReasonRootNotAllowed
		msg = fmt.Sprintf("spec.template.user %s is uid 0 on node %s, which only a UserGrant of the user root allows: %s, "+
			"or name root and have it granted", user, nodeName, ownUID)
	case errors.Is(err, identity.ErrNeverGranted):
		reason = v1.ReasonUserNeverGranted
		msg = fmt.Sprintf("node %s refuses spec.template.user %s whatever its UserGrant says: %v: %s, "+
			"or an administrator changes the account or the grant's supplementaryGroups", nodeName, user, err, ownUID)
	case errors.Is(err, node.ErrMetadataNotGranted):
		reason = v1.ReasonMetadataNotGranted
		msg = fmt.Sprintf("spec.template.network.cloudMetadata is Allow, which takes a UserGrant of spec.template.user %q "+
			"to namespace %s on node %s with cloudMetadata: true (the service hands out the node's cloud credentials): "+
			"set it to Deny, or a cluster administrator grants it", user, ns, nodeName)
	case errors.Is(err, identity.ErrUnknownUser):
		reason = v1.ReasonUnknownUser
		msg = fmt.Sprintf("spec.template.user %s is granted but does not exist on node %s: create it there, or %s",
			user, nodeName, ownUID)
	default:
		return note{}, false
	}
	return note{reason: reason, stalled: true, msg: msg}, true
}
