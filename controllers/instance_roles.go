package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// roleWait is how soon a running seed is looked at again should its exit
// event be lost; the event normally comes first.
const roleWait = 5 * time.Second

func (s *instanceScope) roleRef(r layout.Role) node.Ref {
	return node.Ref{InstanceRef: s.ref(), Role: r}
}

// roleRequest starts a seed or sidecar in the template's environment:
// its env, envFrom, working dir and user, as the app gets them.
func (s *instanceScope) roleRequest(ctx context.Context, ref node.Ref, role v1.Role) (node.StartRequest, error) {
	g, err := ReadGrant(ctx, s.r.Client, s.inst.Namespace, s.inst.Spec.Template.User, s.r.NodeName)
	if err != nil {
		return node.StartRequest{}, err
	}
	key, err := roleKey(ctx, s.r.Reader, s.r.KeyNamespace, s.inst)
	if err != nil {
		return node.StartRequest{}, err
	}
	req, err := startRequest(ctx, s.r.Reader, s.inst, ref, &s.inst.Spec.Template, g)
	req.Command, req.Args, req.Grace, req.InstanceKey = role.Command, role.Args, time.Second, key
	return req, err
}

// ensureSeed runs the seed role once, before the first generation, which
// waits for it (s.done); a failed seed stalls the Instance with its exit
// until the spec changes.
func (r *InstanceReconciler) ensureSeed(ctx context.Context, s *instanceScope) (ctrl.Result, error) {
	seed := s.inst.Spec.Template.Seed
	if seed == nil || len(s.gens) > 0 || s.inst.Annotations[AnnotationSeeded] != "" {
		return ctrl.Result{}, nil
	}
	ref := s.roleRef(layout.RoleSeed)
	st, err := r.Runtime.Observe(ctx, ref)
	if err != nil {
		return s.stop(ctrl.Result{}, fmt.Errorf("observe seed: %w", err))
	}
	switch {
	case st.Populated || st.ActiveState == "active" || st.ActiveState == "activating":
		s.progress(v1.ReasonProgressing, "seed running")
		return s.stop(ctrl.Result{RequeueAfter: roleWait}, nil)
	case st.Exit != nil && st.Exit.Code == 0 && st.Exit.Signal == 0:
		if kill := r.Runtime.Retire(ctx, ref, time.Second); !kill.Proven {
			s.note = note{reason: string(kill.Reason), msg: "seed: " + kill.Err().Error(), unproven: true}
			return s.stop(ctrl.Result{}, kill.Err())
		}
		if err := s.markSeeded(ctx); err != nil {
			return s.stop(ctrl.Result{}, err)
		}
		r.event(s.inst, corev1.EventTypeNormal, "Seeded", "Seed", "seed finished")
		return ctrl.Result{}, nil
	case st.Exit != nil:
		stalled := meta.FindStatusCondition(s.inst.Status.Conditions, v1.ConditionStalled)
		if stalled == nil || stalled.Reason != v1.ReasonSeedFailed || stalled.ObservedGeneration == s.inst.Generation {
			if stalled == nil || stalled.Reason != v1.ReasonSeedFailed {
				r.event(s.inst, corev1.EventTypeWarning, v1.ReasonSeedFailed, "Seed", "seed failed: %s", describeExit(st.Exit))
			}
			s.note = note{reason: v1.ReasonSeedFailed, stalled: true,
				msg: fmt.Sprintf("seed failed: %s; change the Instance to run it again", describeExit(st.Exit))}
			return s.stop(ctrl.Result{}, nil)
		}
		// The spec changed since the seed failed: prove the failed run
		// gone, then start the seed again.
		if kill := r.Runtime.Retire(ctx, ref, time.Second); !kill.Proven {
			s.note = note{reason: string(kill.Reason), msg: "seed: " + kill.Err().Error(), unproven: true}
			return s.stop(ctrl.Result{}, kill.Err())
		}
	}
	req, err := s.roleRequest(ctx, ref, *seed)
	if err != nil {
		// Nothing was started; an administrator's opt-in or a new Secret
		// lets the next look through.
		s.progress(v1.ReasonEnvUnavailable, "seed not started: %v", err)
		return s.stop(ctrl.Result{RequeueAfter: roleWait}, nil)
	}
	res := r.Runtime.Start(ctx, req)
	switch res.Start.Kind {
	case outcome.NotStarted:
		s.note = note{reason: v1.ReasonSeedFailed, stalled: true, msg: "seed not started: " + res.Start.Err().Error()}
		return s.stop(ctrl.Result{}, nil)
	case outcome.MayHaveRun, outcome.QueuedJobMayRun:
		s.progress(res.Start.Kind.String(), "seed may have run: %v", res.Start.Err())
	default:
		s.progress(v1.ReasonProgressing, "seed started")
	}
	return s.stop(ctrl.Result{RequeueAfter: roleWait}, nil)
}

// markSeeded records on the Instance that its seed has run, so it never
// runs again, whatever happens to the node's records.
func (s *instanceScope) markSeeded(ctx context.Context) error {
	patch := client.MergeFrom(s.inst.DeepCopy())
	if s.inst.Annotations == nil {
		s.inst.Annotations = map[string]string{}
	}
	s.inst.Annotations[AnnotationSeeded] = s.r.Clock.Now().UTC().Format(time.RFC3339)
	if err := s.r.Client.Patch(ctx, s.inst, patch); err != nil {
		return fmt.Errorf("record the seed: %w", err)
	}
	return nil
}

// retireRoles proves the seed, every sidecar slot and every run gone
// (suspend, delete), also sidecars no longer in the template.
func (s *instanceScope) retireRoles(ctx context.Context) (bool, error) {
	sidecars, runs, err := s.roleSlots(ctx)
	if err != nil {
		return false, err
	}
	for _, ref := range slices.Concat([]node.Ref{s.roleRef(layout.RoleSeed)}, sidecars, runs) {
		if kill := s.r.Runtime.Retire(ctx, ref, time.Second); !kill.Proven {
			s.note = note{reason: string(kill.Reason), msg: fmt.Sprintf("%s: %v", slotName(ref), kill.Err()), unproven: true, reconciling: true}
			return false, nil
		}
	}
	s.r.sidecars.forget(s.ref())
	return true, nil
}
