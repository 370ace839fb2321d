package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// swapFacts is what the swap decision reads: the Instance's strategy and
// template hash, and its Generations as the cache holds them.
type swapFacts struct {
	strategy v1.Strategy
	hash     string
	// host is the Instance's spec.host, held by it (claimHost).
	host string
	// keyFingerprint is the Instance's key (status.keyFingerprint): a
	// rotation makes a new generation as a template change does.
	keyFingerprint string
	// gens oldest first; active is the one serving (nil: none), latest
	// the newest (nil: none yet).
	gens           []*v1.Generation
	active, latest *v1.Generation
	// waking: a connection woke the sleeping Instance.
	waking bool
}

// swapAction is the one thing a reconcile does to move a swap on.
type swapAction string

const (
	// swapCreate makes the next generation (raise: lift the parent limit
	// first, an Overlap beside a serving one).
	swapCreate swapAction = "Create"
	// swapRetireAll: Replace retires every generation and waits for each
	// to be proven gone before the next starts.
	swapRetireAll swapAction = "RetireAll"
	// swapReplaceExited: target ended on its own while nothing else
	// serves; a successor with the same template follows.
	swapReplaceExited swapAction = "ReplaceExited"
	// swapAbort: latest failed to take over; the active one keeps serving.
	swapAbort swapAction = "Abort"
	// swapAborted: latest was given up earlier; stalled until the
	// template changes (restore: the overlap is over).
	swapAborted swapAction = "Aborted"
	// swapAwaitReady: latest runs and is not ready yet.
	swapAwaitReady swapAction = "AwaitReady"
	// swapPromote: latest is ready: it serves, the active one retires.
	swapPromote swapAction = "Promote"
	// swapAwaitRetired: latest serves; older ones are still retiring.
	swapAwaitRetired swapAction = "AwaitRetired"
	// swapSettled: latest serves alone (restore: lower the parent limit
	// from the overlap).
	swapSettled swapAction = "Settled"
	// swapIdle: nothing serves and nothing is to start (latest retired,
	// no active one).
	swapIdle swapAction = "Idle"
)

// swapDecision is decideSwap's answer.
type swapDecision struct {
	action swapAction
	// target is the generation acted on or waited for.
	target *v1.Generation
	// stale are neither active nor latest: retired whatever the action.
	stale []*v1.Generation
	// raise (Create) and restore (Aborted, Settled) move the parent limit.
	raise, restore bool
	// sidecars: the Instance serves, so its sidecars should run.
	sidecars bool
}

// decideSwap is the swap as a pure function of facts: which generation
// to make, promote, abort, replace or wait for.
func decideSwap(f swapFacts) swapDecision {
	latest, active := f.latest, f.active
	if latest == nil || outdated(latest, f) || (latest.Spec.Retired && nothingRuns(latest, active, f.waking)) {
		if f.strategy == v1.StrategyReplace {
			for _, g := range f.gens {
				if !terminated(g) {
					return swapDecision{action: swapRetireAll}
				}
			}
			return swapDecision{action: swapCreate}
		}
		// No overlap beside one the reboot ended: nothing of it runs, and
		// its parent cgroup went with the boot.
		return swapDecision{action: swapCreate, raise: active != nil && !active.Spec.Retired && !goneWithBoot(active)}
	}
	d := swapDecision{}
	for _, g := range f.gens {
		if g != latest && g != active {
			d.stale = append(d.stale, g)
		}
	}
	switch {
	case latest.Spec.Retired:
		switch {
		case active != nil && ended(active) && !active.Spec.Retired:
			// Its successor was already given up (an aborted swap) when
			// the serving one ended: replace that one too.
			d.action, d.target = swapReplaceExited, active
		case retiredBecause(latest) == RetiredSwapAborted:
			d.action, d.target = swapAborted, latest
			d.restore = active != nil && terminated(latest)
		default:
			d.action = swapIdle
		}
		d.sidecars = active != nil && d.action != swapReplaceExited
	case latest == active:
		if ended(active) {
			d.action, d.target = swapReplaceExited, active
			return d
		}
		d.action, d.sidecars = swapSettled, true
		for _, g := range f.gens {
			if g != latest && !terminated(g) {
				d.action, d.target = swapAwaitRetired, g
				return d
			}
		}
		d.restore = len(f.gens) > 1
	case failed(latest) && (active == nil || active.Spec.Retired || ended(active) || unresolved(latest)):
		// Nothing serves to fall back to (nothing served yet, the active
		// one ended too or went with the node's boot, or Replace already
		// retired it), or the start was
		// lost, not refused (an agent that died mid-start): one more
		// crash, restarted with the backoff as a kubelet restarts a
		// container, not an aborted swap.
		d.action, d.target = swapReplaceExited, latest
	case failed(latest):
		d.action, d.target = swapAbort, latest
	case !ready(latest):
		d.action, d.target = swapAwaitReady, latest
	default:
		d.action, d.target = swapPromote, latest
	}
	return d
}

// outdated: g was made of another template, for another host (one made
// before hosts were frozen serves the Instance's host, whichever), or
// with another instance key (a rotation; no key yet changes nothing).
func outdated(g *v1.Generation, f swapFacts) bool { return outdatedBy(g, f) != "" }

// outdatedBy says what outdates g ("": nothing).
func outdatedBy(g *v1.Generation, f swapFacts) string {
	switch {
	case g.Annotations[AnnotationTemplateHash] != f.hash:
		return fmt.Sprintf("template changed: hash %s -> %s", g.Annotations[AnnotationTemplateHash], f.hash)
	case g.Spec.Host != "" && g.Spec.Host != f.host:
		return fmt.Sprintf("host changed: %s -> %s", g.Spec.Host, f.host)
	case f.keyFingerprint != "" && g.Spec.KeyFingerprint != f.keyFingerprint:
		return fmt.Sprintf("instance key changed: %.12s -> %.12s", g.Spec.KeyFingerprint, f.keyFingerprint)
	}
	return ""
}

// createCause says why decideSwap makes a generation after latest: what
// an operator reads in the agent's log when a generation appears that no
// edit asked for.
func createCause(f swapFacts) string {
	if f.latest == nil {
		return "first"
	}
	if why := outdatedBy(f.latest, f); why != "" {
		return why
	}
	return fmt.Sprintf("generation %d retired (%s) and nothing runs", f.latest.Spec.Number, retiredBecause(f.latest))
}

// unresolved: g's start was given up with its outcome unknown; nothing
// says the template is at fault.
func unresolved(g *v1.Generation) bool {
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionReady)
	return c != nil && c.Reason == v1.ReasonStartUnresolved
}
