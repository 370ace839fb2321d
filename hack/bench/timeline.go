package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// The batch's critical path as the API shows it: for each Instance, when
// the bench's watch first saw each step after its apply. Which step takes
// the time says which round trip, queue or wait to look at.

// stages, in the order the agent takes them.
var stages = []struct{ name, what string }{
	{"finalizer", "the agent's finalizer on the Instance"},
	{"key", "status.keyFingerprint (the cluster side's key minter)"},
	{"generation", "Generation 1 created"},
	{"started", "Generation 1 Started=True"},
	{"genReady", "Generation 1 Ready=True"},
	{"ready", "the Instance Ready, serving generation 1"},
}

// timeline records the first time each stage was seen, per Instance;
// with trace, every version of the traced Instance and its Generations
// as the watch brought them (-trace: which write came when).
type timeline struct {
	mu    sync.Mutex
	at    map[string]map[string]time.Time
	trace string
	lines []string
}

// traceLine notes one version of o when it belongs to the traced Instance.
func (t *timeline) traceLine(inst string, o client.Object, now time.Time, summary string) {
	if t.trace == "" || inst != t.trace {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, fmt.Sprintf("%s %s rv=%s %s", now.Format("15:04:05.000"), o.GetName(), o.GetResourceVersion(), summary))
}

func conditionsOf(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(parts, ",")
}

func (t *timeline) saw(inst, stage string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at[inst] == nil {
		t.at[inst] = map[string]time.Time{}
	}
	if _, ok := t.at[inst][stage]; !ok {
		t.at[inst][stage] = now
	}
}

func (t *timeline) onInstance(o client.Object, now time.Time) {
	inst, ok := o.(*v1.Instance)
	if !ok {
		return
	}
	if controllerutil.ContainsFinalizer(inst, v1.Finalizer) {
		t.saw(inst.Name, "finalizer", now)
	}
	if inst.Status.KeyFingerprint != "" {
		t.saw(inst.Name, "key", now)
	}
	if served(1)(inst) {
		t.saw(inst.Name, "ready", now)
	}
	t.traceLine(inst.Name, inst, now, fmt.Sprintf("finalizers=%v key=%.8s active=%d observed=%d %s",
		inst.Finalizers, inst.Status.KeyFingerprint, inst.Status.ActiveGeneration, inst.Status.ObservedGeneration, conditionsOf(inst.Status.Conditions)))
}

func (t *timeline) onGeneration(o client.Object, now time.Time) {
	g, ok := o.(*v1.Generation)
	if !ok || g.Spec.Number != 1 {
		return
	}
	t.saw(g.Spec.Instance, "generation", now)
	if meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionStarted) {
		t.saw(g.Spec.Instance, "started", now)
	}
	if meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady) {
		t.saw(g.Spec.Instance, "genReady", now)
	}
	t.traceLine(g.Spec.Instance, g, now, fmt.Sprintf("phase=%s %s", g.Status.Phase, conditionsOf(g.Status.Conditions)))
}

// watchTimeline follows the bench's Instances and Generations until the
// returned stop is called.
func (h *harness) watchTimeline(ctx context.Context, trace string) (*timeline, func()) {
	t := &timeline{at: map[string]map[string]time.Time{}, trace: trace}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.followAll(ctx, &v1.InstanceList{}, t.onInstance) }()
	go func() { defer wg.Done(); h.followAll(ctx, &v1.GenerationList{}, t.onGeneration) }()
	return t, func() { cancel(); wg.Wait() }
}

// followAll hands every object of list's kind in the bench's namespace,
// listed then watched, to on, until ctx ends; a watch that ends is
// started again after a list.
func (h *harness) followAll(ctx context.Context, list client.ObjectList, on func(client.Object, time.Time)) {
	for ctx.Err() == nil {
		if err := h.c.List(ctx, list, client.InNamespace(benchNS)); err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		now := time.Now()
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			if o, ok := it.(client.Object); ok {
				on(o, now)
			}
		}
		w, err := h.c.Watch(ctx, list, client.InNamespace(benchNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Error {
				break
			}
			if ev.Type != watch.Deleted {
				on(o, time.Now())
			}
		}
		w.Stop()
	}
}

// stageRow is one stage's time since the apply, and since the stage
// before it, over every Instance that reached both.
type stageRow struct {
	Stage    string  `json:"stage"`
	What     string  `json:"what"`
	Reached  int     `json:"reached"`
	SinceP50 float64 `json:"sinceApplyP50Seconds"`
	SinceP99 float64 `json:"sinceApplyP99Seconds"`
	StepP50  float64 `json:"sincePreviousP50Seconds"`
	StepP99  float64 `json:"sincePreviousP99Seconds"`
}

// rows is the timeline against each Instance's apply (began).
func (t *timeline) rows(began map[string]time.Time) []stageRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []stageRow
	for i, st := range stages {
		var since, step []time.Duration
		for name, b := range began {
			at, ok := t.at[name][st.name]
			if !ok {
				continue
			}
			since = append(since, at.Sub(b))
			prev := b
			if i > 0 {
				if p, ok := t.at[name][stages[i-1].name]; ok {
					prev = p
				}
			}
			step = append(step, at.Sub(prev))
		}
		r := stageRow{Stage: st.name, What: st.what, Reached: len(since)}
		r.SinceP50, _, r.SinceP99 = testutil.Percentiles(since)
		r.StepP50, _, r.StepP99 = testutil.Percentiles(step)
		out = append(out, r)
	}
	return out
}

func stageTable(rows []stageRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %-10s | %-7s | %-19s | %-19s | %s\n", "stage", "reached", "since apply p50/p99", "since prev p50/p99", "what")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-10s | %-7d | %6.0f / %6.0f ms  | %6.0f / %6.0f ms  | %s\n", r.Stage, r.Reached,
			r.SinceP50*1000, r.SinceP99*1000, r.StepP50*1000, r.StepP99*1000, r.What)
	}
	return b.String()
}
