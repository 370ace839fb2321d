package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/node"
)

// note is what a reconcile learned that status should say, beyond what
// the Generations' own conditions tell.
type note struct {
	reason, msg string
	reconciling bool // work under way: a swap, a retirement, a deletion
	stalled     bool // cannot progress without a change to the spec
	unproven    bool // a role's kill is not proven (reason in reason)
}

// instanceScope is one reconcile of an Instance: the object, its
// Generations (oldest first), what the phases noted for status, and
// whether one of them settled the reconcile. Phases are methods of
// InstanceReconciler taking the scope; helpers that are not phases are
// methods of the scope.
//
// Status is written in two parts. The phases own the fields that record
// what they did on the node, and only they write them:
//   - ActiveGeneration: advance (promote), and suspendIfAsked,
//     sleepOrWake and fallAsleepIfIdle (0 once every generation is
//     proven gone);
//   - Socket: ensureFinalizer (the stable socket's path) and advance
//     (the path a promotion returned);
//   - IdleSince: sleepOrWake and fallAsleepIfIdle, cleared by
//     suspendIfAsked;
//   - WokenAt: sleepOrWake (set), advance (cleared by the promotion that
//     ends a wake) and suspendIfAsked (cleared).
//
// ObservedGeneration and every condition are the status setters' alone
// (computeInstanceStatus), from facts read once after the phases ran.
type instanceScope struct {
	r    *InstanceReconciler
	inst *v1.Instance
	gens []*v1.Generation
	note note
	// done: a phase settled the reconcile; the later ones wait.
	done bool
	// released: finalize let the lease go; the Instance is deleted.
	released bool
	// quiet: nothing is written this time (quietSwap).
	quiet bool
	// patchBase is the Instance the status patch is computed against.
	patchBase *v1.Instance
	// elsewhere is the highest generation number the Instance has on
	// other nodes (0: none, or not looked for): a move continues the
	// numbering.
	elsewhere int64
	// servingThere is, during a move here, the generation serving on the
	// old node, as the API server has it.
	servingThere *v1.Generation
}

// instancePhase is one step of an Instance's reconcile. A non-zero
// result, an error or s.done ends the reconcile after it.
type instancePhase func(ctx context.Context, s *instanceScope) (ctrl.Result, error)

// stop ends the reconcile after this phase with res and err.
func (s *instanceScope) stop(res ctrl.Result, err error) (ctrl.Result, error) {
	s.done = true
	return res, err
}

func (s *instanceScope) ref() node.InstanceRef {
	return node.InstanceRef{Namespace: s.inst.Namespace, Name: s.inst.Name}
}

func (s *instanceScope) latest() *v1.Generation {
	if len(s.gens) == 0 {
		return nil
	}
	return s.gens[len(s.gens)-1]
}

// nextNumber is the number of the Instance's next generation: after its
// newest here and any it had on another node.
func (s *instanceScope) nextNumber() int64 {
	n := s.elsewhere
	if l := s.latest(); l != nil && l.Spec.Number > n {
		n = l.Spec.Number
	}
	return n + 1
}

// servesElsewhere: the Instance's serving generation is on another node
// (a move to this one is under way): its status's socket and node are
// that node's until this one promotes.
func (s *instanceScope) servesElsewhere() bool {
	return s.inst.Status.NodeName != "" && s.inst.Status.NodeName != s.r.NodeName
}

func (s *instanceScope) number(n int64) *v1.Generation {
	for _, g := range s.gens {
		if g.Spec.Number == n {
			return g
		}
	}
	return nil
}

func (s *instanceScope) progress(reason, format string, args ...any) {
	s.note = note{reason: reason, msg: fmt.Sprintf(format, args...), reconciling: true}
}

// retireAll marks every Generation retired and reports whether all of
// them are proven gone.
func (s *instanceScope) retireAll(ctx context.Context, because string) (bool, error) {
	gone := true
	for _, g := range s.gens {
		if err := s.r.retireGeneration(ctx, s.inst, g, because); err != nil {
			return false, err
		}
		gone = gone && terminated(g)
	}
	return gone, nil
}

// swapFacts are what decideSwap reads of this reconcile.
func (s *instanceScope) swapFacts() swapFacts {
	return swapFacts{strategy: s.inst.Spec.Strategy, hash: templateHash(&s.inst.Spec.Template), host: s.inst.Spec.Host, keyFingerprint: s.inst.Status.KeyFingerprint, gens: s.gens,
		active: s.number(s.inst.Status.ActiveGeneration), latest: s.latest(), waking: s.inst.Status.WokenAt != nil}
}
