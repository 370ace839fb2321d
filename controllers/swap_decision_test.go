package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// gb builds a Generation for the swap decision's tests.
type gb struct{ g *v1.Generation }

func generation(n int64, hash string) gb {
	return gb{&v1.Generation{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationTemplateHash: hash}},
		Spec:       v1.GenerationSpec{Number: n},
	}}
}

func (b gb) cond(typ string, st metav1.ConditionStatus) gb {
	b.g.Status.Conditions = append(b.g.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: "Test"})
	return b
}
func (b gb) running() gb { return b.cond(v1.ConditionStarted, metav1.ConditionTrue) }
func (b gb) ready() gb   { return b.running().cond(v1.ConditionReady, metav1.ConditionTrue) }
func (b gb) refused() gb {
	b.g.Status.Phase = v1.PhaseFailed
	return b.cond(v1.ConditionStarted, metav1.ConditionFalse)
}
func (b gb) exited() gb {
	b = b.running()
	b.g.Status.Phase, b.g.Status.Exit = v1.PhaseFailed, &v1.ExitStatus{}
	return b
}
func (b gb) unresolved() gb {
	b = b.cond(v1.ConditionStarted, metav1.ConditionUnknown)
	b.g.Status.Conditions = append(b.g.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonStartUnresolved})
	b.g.Status.Phase = v1.PhaseFailed
	return b
}
func (b gb) retired(because string) gb {
	b.g.Spec.Retired = true
	b.g.Annotations[AnnotationRetiredBecause] = because
	return b
}
func (b gb) gone() gb { return b.cond(v1.ConditionTerminated, metav1.ConditionTrue) }
func (b gb) rebooted() gb {
	b.g.Status.Phase = v1.PhaseFailed
	if b.g.Spec.Retired {
		b.g.Status.Phase = v1.PhaseRetired
	}
	b.g.Status.Conditions = append(b.g.Status.Conditions, metav1.Condition{Type: v1.ConditionTerminated, Status: metav1.ConditionTrue, Reason: v1.ReasonNodeRebooted})
	return b
}
func (b gb) key(fp string) gb {
	b.g.Spec.KeyFingerprint = fp
	return b
}
func (b gb) host(h string) gb {
	b.g.Spec.Host = h
	return b
}

// decision renders a decision as the table compares it: the action, the
// numbers of target and stale generations, and the flags.
type decision struct {
	Action                   swapAction
	Target                   int64
	Stale                    []int64
	Raise, Restore, Sidecars bool
}

func render(d swapDecision) decision {
	out := decision{Action: d.action, Raise: d.raise, Restore: d.restore, Sidecars: d.sidecars}
	if d.target != nil {
		out.Target = d.target.Spec.Number
	}
	for _, g := range d.stale {
		out.Stale = append(out.Stale, g.Spec.Number)
	}
	return out
}

func TestDecideSwap(t *testing.T) {
	tests := map[string]struct {
		strategy v1.Strategy
		gens     []gb
		active   int64
		waking   bool
		key      string // the Instance's status.keyFingerprint
		want     decision
	}{
		"no generation yet": {
			want: decision{Action: swapCreate},
		},
		"overlap: a new template beside the serving one raises the parent": {
			gens: []gb{generation(1, "old").ready()}, active: 1,
			want: decision{Action: swapCreate, Raise: true},
		},
		"replace: a new template waits for the old one's proof": {
			strategy: v1.StrategyReplace, gens: []gb{generation(1, "old").ready()}, active: 1,
			want: decision{Action: swapRetireAll},
		},
		"replace: every old one proven gone": {
			strategy: v1.StrategyReplace, gens: []gb{generation(1, "old").retired(RetiredSuperseded).gone()}, active: 1,
			want: decision{Action: swapCreate},
		},
		"the successor is not ready yet": {
			gens: []gb{generation(1, "old").ready(), generation(2, "h").running()}, active: 1,
			want: decision{Action: swapAwaitReady, Target: 2},
		},
		"the successor is ready: promote": {
			gens: []gb{generation(1, "old").ready(), generation(2, "h").ready()}, active: 1,
			want: decision{Action: swapPromote, Target: 2},
		},
		"the successor failed: abort, the old one keeps serving": {
			gens: []gb{generation(1, "old").ready(), generation(2, "h").refused()}, active: 1,
			want: decision{Action: swapAbort, Target: 2},
		},
		"replace: the successor failed with the old one already gone: replace it, not abort": {
			strategy: v1.StrategyReplace,
			gens:     []gb{generation(1, "old").ready().retired(RetiredSuperseded).gone(), generation(2, "h").exited()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 2},
		},
		"overlap: the successor's start was given up unresolved: try again, not abort": {
			gens: []gb{generation(1, "old").ready(), generation(2, "h").unresolved()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 2},
		},
		"the first generation failed, nothing served yet: replace it": {
			gens: []gb{generation(1, "h").exited()},
			want: decision{Action: swapReplaceExited, Target: 1},
		},
		"the successor failed and the old one ended too: replace": {
			gens: []gb{generation(1, "old").exited(), generation(2, "h").refused()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 2},
		},
		"aborted earlier, its kill proven: stalled, the overlap restored": {
			gens: []gb{generation(1, "old").ready(), generation(2, "h").refused().retired(RetiredSwapAborted).gone()}, active: 1,
			want: decision{Action: swapAborted, Target: 2, Restore: true, Sidecars: true},
		},
		"aborted earlier, the old one ended since: replace it": {
			gens: []gb{generation(1, "old").exited(), generation(2, "h").refused().retired(RetiredSwapAborted).gone()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 1},
		},
		"serving, the old one still retiring": {
			gens: []gb{generation(1, "old").ready().retired(RetiredSuperseded), generation(2, "h").ready()}, active: 2,
			want: decision{Action: swapAwaitRetired, Target: 1, Stale: []int64{1}, Sidecars: true},
		},
		"serving alone after an overlap: restore the parent": {
			gens: []gb{generation(1, "old").retired(RetiredSuperseded).gone(), generation(2, "h").ready()}, active: 2,
			want: decision{Action: swapSettled, Stale: []int64{1}, Restore: true, Sidecars: true},
		},
		"serving, the only generation": {
			gens: []gb{generation(1, "h").ready()}, active: 1,
			want: decision{Action: swapSettled, Sidecars: true},
		},
		"serving the Instance's host": {
			gens: []gb{generation(1, "h").host("h.example.com").ready()}, active: 1,
			want: decision{Action: swapSettled, Sidecars: true},
		},
		"overlap: the host changed (and is claimed): a generation for it beside the old host's": {
			gens: []gb{generation(1, "h").host("old.example.com").ready()}, active: 1,
			want: decision{Action: swapCreate, Raise: true},
		},
		"replace: the host changed: the old host's generation is proven gone first": {
			strategy: v1.StrategyReplace, gens: []gb{generation(1, "h").host("old.example.com").ready()}, active: 1,
			want: decision{Action: swapRetireAll},
		},
		"the serving app ended: replace it": {
			gens: []gb{generation(1, "h").exited()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 1},
		},
		"replaced after it ended: a successor with the same template": {
			gens: []gb{generation(1, "h").exited().retired(RetiredExited)}, active: 1,
			want: decision{Action: swapCreate},
		},
		"resumed after a suspend": {
			gens: []gb{generation(1, "h").retired(RetiredSuspended).gone()},
			want: decision{Action: swapCreate},
		},
		"asleep (idle), its retirement read before the Instance's idleSince: nothing starts": {
			gens: []gb{generation(1, "h").ready().retired(RetiredIdle)}, active: 1,
			want: decision{Action: swapIdle, Sidecars: true},
		},
		"asleep, woken by a connection": {
			gens: []gb{generation(1, "h").retired(RetiredIdle).gone()}, waking: true,
			want: decision{Action: swapCreate},
		},
		"the node rebooted under the serving generation: replace it": {
			gens: []gb{generation(1, "old").retired(RetiredSuperseded).gone(), generation(2, "h").ready().rebooted()}, active: 2,
			want: decision{Action: swapReplaceExited, Target: 2, Stale: []int64{1}},
		},
		"replaced after the reboot: a successor with the same template": {
			gens: []gb{generation(2, "h").ready().retired(RetiredRebooted).rebooted()}, active: 2,
			want: decision{Action: swapCreate},
		},
		"replace: replaced after the reboot, every old one proven gone": {
			strategy: v1.StrategyReplace, gens: []gb{generation(2, "h").ready().retired(RetiredRebooted).rebooted()}, active: 2,
			want: decision{Action: swapCreate},
		},
		"the node rebooted mid-swap: the successor is replaced, not aborted": {
			gens: []gb{generation(1, "old").ready().rebooted(), generation(2, "h").running().rebooted()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 2},
		},
		"after the reboot mid-swap: a successor, with no overlap beside the one the reboot ended": {
			gens: []gb{generation(1, "old").ready().rebooted(), generation(2, "h").running().retired(RetiredRebooted).rebooted()}, active: 1,
			want: decision{Action: swapCreate},
		},
		"its successor fails after the reboot: replaced again, not aborted": {
			gens: []gb{generation(1, "h").ready().rebooted(), generation(2, "h").running().retired(RetiredRebooted).rebooted(), generation(3, "h").refused()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 3, Stale: []int64{2}},
		},
		"the reboot ended the one behind an aborted swap: replace it": {
			gens: []gb{generation(1, "old").ready().rebooted(), generation(2, "h").refused().retired(RetiredSwapAborted).gone()}, active: 1,
			want: decision{Action: swapReplaceExited, Target: 1},
		},
		"asleep across the reboot: nothing starts until woken": {
			gens: []gb{generation(1, "h").retired(RetiredIdle).gone()},
			want: decision{Action: swapIdle},
		},
		"a rotated key makes a successor, as a template change does": {
			gens: []gb{generation(1, "h").key("k1").ready()}, active: 1, key: "k2",
			want: decision{Action: swapCreate, Raise: true},
		},
		"the same key: settled": {
			gens: []gb{generation(1, "h").key("k1").ready()}, active: 1, key: "k1",
			want: decision{Action: swapSettled, Sidecars: true},
		},
		"made before keys, a key minted since: a successor with it": {
			gens: []gb{generation(1, "h").ready()}, active: 1, key: "k1",
			want: decision{Action: swapCreate, Raise: true},
		},
		"no key read (yet): no successor for it": {
			gens: []gb{generation(1, "h").key("k1").ready()}, active: 1,
			want: decision{Action: swapSettled, Sidecars: true},
		},
		"a generation neither active nor latest is retired": {
			gens: []gb{generation(1, "a").ready(), generation(2, "b").running(), generation(3, "h").running()}, active: 1,
			want: decision{Action: swapAwaitReady, Target: 3, Stale: []int64{2}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := swapFacts{strategy: tc.strategy, hash: "h", host: "h.example.com", waking: tc.waking, keyFingerprint: tc.key}
			if f.strategy == "" {
				f.strategy = v1.StrategyOverlap
			}
			for _, b := range tc.gens {
				f.gens = append(f.gens, b.g)
				if b.g.Spec.Number == tc.active {
					f.active = b.g
				}
			}
			if len(f.gens) > 0 {
				f.latest = f.gens[len(f.gens)-1]
			}
			if diff := cmp.Diff(tc.want, render(decideSwap(f))); diff != "" {
				t.Errorf("decision (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCreateCause(t *testing.T) {
	tests := map[string]struct {
		latest *gb
		key    string
		want   string
	}{
		"no generation yet": {want: "first"},
		"a template edit": {
			latest: ptr.To(generation(1, "old").ready()),
			want:   "template changed: hash old -> h",
		},
		"another host": {
			latest: ptr.To(generation(1, "h").host("old.example.com").ready()),
			want:   "host changed: old.example.com -> h.example.com",
		},
		"a rotated key": {
			latest: ptr.To(generation(1, "h").key("0123456789abcdef").ready()), key: "fedcba9876543210",
			want: "instance key changed: 0123456789ab -> fedcba987654",
		},
		"the app exited and was retired": {
			latest: ptr.To(generation(1, "h").exited().retired(RetiredExited)),
			want:   "generation 1 retired (Exited) and nothing runs",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := swapFacts{hash: "h", host: "h.example.com", keyFingerprint: tc.key}
			if tc.latest != nil {
				f.latest = tc.latest.g
			}
			if diff := cmp.Diff(tc.want, createCause(f)); diff != "" {
				t.Errorf("createCause (-want,+got):\n%s", diff)
			}
		})
	}
}
