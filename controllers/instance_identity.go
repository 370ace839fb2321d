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
// looks again: neither an Enrollment's allowRoot nor a user added to the
// node wakes it.
const identityRecheck = 10 * time.Second

// checkIdentity stops the reconcile, noting why, when the node will not
// run the template's user. Nothing starts then (seed, sidecars,
// generations); what already runs keeps running. Another error (the
// node's user database unreadable) is returned as it is.
func (s *swap) checkIdentity(context.Context) (ctrl.Result, error) {
	refused, err := s.identityRefused()
	if refused || err != nil {
		return s.stop(ctrl.Result{RequeueAfter: identityRecheck}, err)
	}
	return ctrl.Result{}, nil
}

func (s *swap) identityRefused() (bool, error) {
	t := &s.inst.Spec.Template
	_, err := s.r.Runtime.Identity(node.InstanceRef{Namespace: s.inst.Namespace, Name: s.inst.Name}, t.User, s.r.Gate.AllowsRoot())
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, identity.ErrRootRefused):
		s.note = note{reason: v1.ReasonRootNotAllowed, stalled: true, msg: fmt.Sprintf(
			"spec.template.user %s is root (uid 0) and node %s does not allow root: leave user empty to run as the Instance's own uid, "+
				"or an administrator allows root with kubectl patch enrollment %s --type=merge -p '{\"spec\":{\"allowRoot\":true}}'",
			t.User, s.inst.Spec.NodeName, s.inst.Spec.NodeName)}
		return true, nil
	case errors.Is(err, identity.ErrUnknownUser):
		s.note = note{reason: v1.ReasonUnknownUser, stalled: true, msg: fmt.Sprintf(
			"spec.template.user %s does not exist on node %s: create it there, or leave user empty to run as the Instance's own uid",
			t.User, s.inst.Spec.NodeName)}
		return true, nil
	}
	return false, fmt.Errorf("identity of %s/%s: %w", s.inst.Namespace, s.inst.Name, err)
}
