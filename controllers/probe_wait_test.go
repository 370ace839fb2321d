package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestProbeWait(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		handedOff bool
		since     time.Duration
		want      time.Duration
	}{
		"just started":                {handedOff: true, want: minProbeWait},
		"40 ms in":                    {handedOff: true, since: 40 * time.Millisecond, want: 20 * time.Millisecond},
		"2 s in":                      {handedOff: true, since: 2 * time.Second, want: 250 * time.Millisecond},
		"started before this process": {want: 250 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start.Add(tc.since))
			r := &GenerationReconciler{ProbeInterval: 250 * time.Millisecond, Clock: clk}
			uid := types.UID("g1")
			if tc.handedOff {
				r.handedOff.Store(uid, handoff{at: start})
			}
			if got := r.probeWait(uid); got != tc.want {
				t.Errorf("probeWait = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestStartWrittenWithReadiness: a start this process knows ran is
// written together with its readiness when the app answers within
// startReportDelay (one status write, not two); a slower app has its
// start written once the delay is over, and an uncertain start at once.
// A start whose answer was lost is said (an Event) even when the first
// look finds it running, and never held.
func TestStartWrittenWithReadiness(t *testing.T) {
	notYet := errors.New("connection refused")
	cases := map[string]struct {
		start     outcome.StartKind
		ranAnyway bool
		// steps: before each reconcile, the clock moves on by after and
		// the probe answers or not; the writes after each reconcile.
		steps []probeStep
	}{
		"answers within the delay: one write": {start: outcome.Running, steps: []probeStep{
			{probe: notYet, want: nil},
			{after: time.Second, probe: notYet, want: nil},
			{after: 10 * time.Millisecond, want: []string{"Started=True/Running Ready=True/ProbeSucceeded"}},
		}},
		"slower than the delay: the start, then readiness": {start: outcome.Running, steps: []probeStep{
			{probe: notYet, want: nil},
			{after: startReportDelay, probe: notYet, want: []string{"Started=True/Running Ready=False/Probing"}},
			{after: time.Second, want: []string{"Started=True/Running Ready=True/ProbeSucceeded"}},
		}},
		"uncertain: written at once": {start: outcome.MayHaveRun, steps: []probeStep{
			{probe: notYet, want: []string{"Started=Unknown/MayHaveRun Ready=absent"}, events: []string{"Warning/MayHaveRun"}},
		}},
		"answer lost, running at the first look, ready": {start: outcome.MayHaveRun, ranAnyway: true, steps: []probeStep{
			{want: []string{"Started=True/Running Ready=True/ProbeSucceeded"}, events: []string{"Warning/MayHaveRun"}},
		}},
		"answer lost, running at the first look, not ready: not held": {start: outcome.MayHaveRun, ranAnyway: true, steps: []probeStep{
			{probe: notYet, want: []string{"Started=True/Running Ready=False/Probing"}, events: []string{"Warning/MayHaveRun"}},
			{after: time.Second, want: []string{"Started=True/Running Ready=True/ProbeSucceeded"}},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}, Spec: v1.InstanceSpec{NodeName: "n1"}}
			gen := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-g1", UID: "g1", Finalizers: []string{v1.Finalizer}},
				Spec: v1.GenerationSpec{Instance: "app", Number: 1, NodeName: "n1"}}
			var writes []string
			c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Generation{}).
				WithObjects(inst, gen).WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					if g, ok := obj.(*v1.Generation); ok {
						writes = append(writes, "Started="+condition(g.Status.Conditions, v1.ConditionStarted)+
							" Ready="+condition(g.Status.Conditions, v1.ConditionReady))
					}
					return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
				}}).Build()
			rt := newFakeRuntime()
			ref := node.GenerationRef("ns", "app", 1)
			rt.start[ref], rt.ranAnyway[ref] = tc.start, tc.ranAnyway
			rec := events.NewFakeRecorder(8)
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
			r := &GenerationReconciler{Client: c, Reader: c, Runtime: rt, NodeName: "n1", Clock: clk,
				Gate: hostgate.Always{}, ProbeInterval: 250 * time.Millisecond, Recorder: rec}
			for i, st := range tc.steps {
				clk.Step(st.after)
				rt.probe[ref] = st.probe
				writes = nil
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(gen)}); err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if diff := cmp.Diff(st.want, writes); diff != "" {
					t.Errorf("reconcile %d: status writes (-want,+got):\n%s", i, diff)
				}
				if diff := cmp.Diff(st.events, heldEvents(rec)); diff != "" {
					t.Errorf("reconcile %d: events (-want,+got):\n%s", i, diff)
				}
			}
		})
	}
}

// probeStep is one reconcile of TestStartWrittenWithReadiness.
type probeStep struct {
	after  time.Duration
	probe  error
	want   []string
	events []string // type/reason
}

// heldEvents is every event rec holds now, as type/reason.
func heldEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			f := strings.Fields(e)
			out = append(out, f[0]+"/"+f[1])
		default:
			return out
		}
	}
}
