package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// The API floor: on the same API server and etcd, a raw client-go client
// (no rate limit, 16 workers, one keep-alive connection) does for N
// Instances exactly the writes a truthful agent cannot avoid after the
// user's apply, on Instances of its own namespace and node that no agent
// watches. It authenticates as the agents do, so the same priority level
// bounds it. Each unitlet phase is printed as a ratio to it plus the raw
// starts.

const (
	floorNS      = "bench-floor"
	floorNode    = "floor"
	floorWorkers = 16
)

// floorWrites lists, per phase, the writes each Instance costs, and why
// no agent can skip them.
var floorWrites = map[string][]string{
	"create": {
		"patch Instance: add the finalizer (the node's state must be cleaned before the Instance goes)",
		"create Generation, with its finalizer (the running unit's record)",
		"patch Generation status once (Running: unit, pid, started)",
		"patch Instance status once (Ready, activeGeneration)",
	},
	"swap": {
		"create Generation 2, with its finalizer",
		"patch Generation 2 status once",
		"patch Instance status once (activeGeneration 2)",
		"patch Generation 1: remove its finalizer (its unit stopped)",
		"delete Generation 1",
	},
	"delete": {
		"patch Generation 2: remove its finalizer (its unit stopped)",
		"delete Generation 2",
		"patch Instance: remove the finalizer",
	},
}

// floorFigures: seconds for the agent's writes of each phase, all N, and
// for the user's own (the Instances' create, patch and delete) beside
// them, which the unitlet phases include and the floor does not.
type floorFigures struct {
	Create     float64 `json:"createSeconds"`
	Swap       float64 `json:"swapSeconds"`
	Delete     float64 `json:"deleteSeconds"`
	UserCreate float64 `json:"userCreateSeconds"`
	UserSwap   float64 `json:"userSwapSeconds"`
	UserDelete float64 `json:"userDeleteSeconds"`
}

var (
	instancesGVR   = v1.GroupVersion.WithResource("instances")
	generationsGVR = v1.GroupVersion.WithResource("generations")
)

type floorClient struct {
	inst, gen dynamic.ResourceInterface
	app       string
}

func apiFloor(ctx context.Context, h *harness, r *results) error {
	fc, err := h.floorClient(ctx)
	if err != nil {
		return err
	}
	f := &floorFigures{}
	r.Floor = f
	steps := []struct {
		user, agent *float64
		userDo      func(context.Context, string) error
		agentDo     func(context.Context, string) error
	}{
		{&f.UserCreate, &f.Create, fc.userCreate, fc.create},
		{&f.UserSwap, &f.Swap, fc.userSwap, fc.swap},
		{&f.UserDelete, &f.Delete, fc.userDelete, fc.delete},
	}
	ns := names("floor", h.o.n)
	for _, s := range steps {
		if *s.user, err = floorRun(ctx, ns, s.userDo); err != nil {
			return err
		}
		if *s.agent, err = floorRun(ctx, ns, s.agentDo); err != nil {
			return err
		}
	}
	return nil
}

// floorClient makes the floor's namespace (once) and its client, with
// the agents' credentials.
func (h *harness) floorClient(ctx context.Context) (*floorClient, error) {
	err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNS}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfg := rest.CopyConfig(h.agentCfg)
	cfg.QPS = -1
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &floorClient{inst: dc.Resource(instancesGVR).Namespace(floorNS), gen: dc.Resource(generationsGVR).Namespace(floorNS), app: h.app}, nil
}

// floorRun runs do for every name on floorWorkers workers; it returns the
// seconds until the last was done.
func floorRun(ctx context.Context, names []string, do func(context.Context, string) error) (float64, error) {
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	t0 := time.Now()
	for range floorWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := do(ctx, n); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", n, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	return time.Since(t0).Seconds(), first
}

func (fc *floorClient) userCreate(ctx context.Context, name string) error {
	inst := benchInstance(name, "1", fc.app)
	inst.Namespace, inst.Spec.NodeName = floorNS, floorNode
	inst.APIVersion, inst.Kind = v1.GroupVersion.String(), "Instance"
	u, err := toUnstructured(inst)
	if err != nil {
		return err
	}
	_, err = fc.inst.Create(ctx, u, metav1.CreateOptions{})
	return err
}

func (fc *floorClient) userSwap(ctx context.Context, name string) error {
	return fc.patch(ctx, fc.inst, name, map[string]any{"spec": map[string]any{"template": map[string]any{"env": []any{map[string]any{"name": "SALT", "value": "2"}}}}})
}

func (fc *floorClient) userDelete(ctx context.Context, name string) error {
	return fc.inst.Delete(ctx, name, metav1.DeleteOptions{})
}

func (fc *floorClient) create(ctx context.Context, name string) error {
	if err := fc.patch(ctx, fc.inst, name, map[string]any{"metadata": map[string]any{"finalizers": []string{v1.Finalizer}}}); err != nil {
		return err
	}
	return fc.startGeneration(ctx, name, 1)
}

func (fc *floorClient) swap(ctx context.Context, name string) error {
	if err := fc.startGeneration(ctx, name, 2); err != nil {
		return err
	}
	return fc.removeGeneration(ctx, name, 1)
}

func (fc *floorClient) delete(ctx context.Context, name string) error {
	if err := fc.removeGeneration(ctx, name, 2); err != nil {
		return err
	}
	return fc.patch(ctx, fc.inst, name, map[string]any{"metadata": map[string]any{"finalizers": nil}})
}

// startGeneration: create it with its finalizer, its status once, the
// Instance's status once.
func (fc *floorClient) startGeneration(ctx context.Context, name string, number int64) error {
	inst := benchInstance(name, fmt.Sprint(number), fc.app)
	gen := &v1.Generation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "Generation"},
		ObjectMeta: metav1.ObjectMeta{Namespace: floorNS, Name: fmt.Sprintf("%s-%d", name, number), Finalizers: []string{v1.Finalizer}},
		Spec:       v1.GenerationSpec{Instance: name, NodeName: floorNode, Number: number, Host: inst.Spec.Host, Template: inst.Spec.Template},
	}
	u, err := toUnstructured(gen)
	if err != nil {
		return err
	}
	if _, err := fc.gen.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return err
	}
	now := metav1.Now()
	ready := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving", Message: "floor", LastTransitionTime: now}}
	if err := fc.patch(ctx, fc.gen, gen.Name, map[string]any{"status": map[string]any{
		"observedGeneration": 1, "phase": v1.PhaseRunning, "unit": gen.Name, "mainPID": 1, "startedAt": now, "conditions": ready,
	}}, "status"); err != nil {
		return err
	}
	return fc.patch(ctx, fc.inst, name, map[string]any{"status": map[string]any{
		"observedGeneration": number, "activeGeneration": number, "conditions": ready,
	}}, "status")
}

// removeGeneration: its finalizer off (its unit stopped), then its delete.
func (fc *floorClient) removeGeneration(ctx context.Context, name string, number int64) error {
	gen := fmt.Sprintf("%s-%d", name, number)
	if err := fc.patch(ctx, fc.gen, gen, map[string]any{"metadata": map[string]any{"finalizers": nil}}); err != nil {
		return err
	}
	return fc.gen.Delete(ctx, gen, metav1.DeleteOptions{})
}

func (fc *floorClient) patch(ctx context.Context, ri dynamic.ResourceInterface, name string, body map[string]any, sub ...string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, sub...)
	return err
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	return &unstructured.Unstructured{Object: m}, err
}

// floorTable prints each unitlet phase beside its floor, the raw starts
// and the ratio, the writes the floor made, and the other client's reads.
func (r *results) floorTable() string {
	var b strings.Builder
	f := r.Floor
	if f == nil {
		return ""
	}
	starts := 0.0
	if r.RawForkExec != nil {
		starts = r.RawForkExec.All
	}
	fmt.Fprintf(&b, "\nthe API floor (raw client-go, %d workers, the agents' priority level), N=%d; raw starts: N raw fork/execs, all ready (%.1f s):\n\n", floorWorkers, r.N, starts)
	row := func(a, b2, c, d, e, g string) {
		fmt.Fprintf(&b, "| %-7s | %-9s | %-11s | %-10s | %-24s | %-14s |\n", a, b2, c, d, e, g)
	}
	row("phase", "unitlet", "API floor", "raw starts", "unitlet / (floor+starts)", "unitlet / floor")
	row("-------", "---------", "-----------", "----------", strings.Repeat("-", 24), strings.Repeat("-", 14))
	for _, p := range []struct {
		name       string
		got, floor float64
	}{
		{"create", r.Create.All, f.Create},
		{"swap", r.Swap.All, f.Swap},
		{"delete", r.Delete.All, f.Delete},
	} {
		row(p.name, fmt.Sprintf("%.1f s", p.got), fmt.Sprintf("%.2f s", p.floor), fmt.Sprintf("%.1f s", starts), ratio(p.got, p.floor+starts)+" (target ≤ 2×)", ratio(p.got, p.floor))
	}
	fmt.Fprintf(&b, "the users' own writes beside the floor (not in it; in the unitlet phases): create %.2f s, patch %.2f s, delete %.2f s\n", f.UserCreate, f.UserSwap, f.UserDelete)
	fmt.Fprintf(&b, "the floor's writes per Instance:\n")
	for _, ph := range []string{"create", "swap", "delete"} {
		fmt.Fprintf(&b, "  %s (%d):\n", ph, len(floorWrites[ph]))
		for _, w := range floorWrites[ph] {
			fmt.Fprintf(&b, "    - %s\n", w)
		}
	}
	rd := r.Reads
	fmt.Fprintf(&b, "\nanother client's reads (GET and LIST of a ConfigMap in %s, its own ServiceAccount), the agent in priority level %q:\n", readerNS, rd.AgentLevel)
	for _, l := range []struct {
		name string
		l    latencies
	}{{"at rest (10 s)", rd.AtRest}, {"during the create", rd.DuringCreate}} {
		fmt.Fprintf(&b, "  %-18s p50/p90/p99 %.1f/%.1f/%.1f ms, max %.1f ms (%d reads)\n", l.name, 1000*l.l.P50, 1000*l.l.P90, 1000*l.l.P99, 1000*l.l.Max, l.l.Count)
	}
	return b.String()
}
