package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// The tests here run one table against both backends.

func TestStartOutcomes(t *testing.T) {
	tests := map[string]struct {
		argv       []string
		trampoline string
		afterStart time.Duration
		cancelled  bool
		// stopsOnceSent: the caller's context ends once the start is sent
		// (an agent stopping for a rollout).
		stopsOnceSent bool
		want          outcome.StartKind
		wantExit      *outcome.Exit
		// wantExitBy overrides wantExit for one backend.
		wantExitBy map[string]*outcome.Exit
		wantErr    string // substring of the start's error
	}{
		"a long-running app is Running": {
			argv: []string{"/bin/sleep", "1000"}, want: outcome.Running,
		},
		"an app that exits at once is ExitedBeforeObserved": {
			argv: []string{"/bin/sh", "-c", "exit 7"}, afterStart: 300 * time.Millisecond,
			want: outcome.ExitedBeforeObserved, wantExit: &outcome.Exit{Result: "exit-code", Code: 7},
			wantErr: "exited before it was observed",
		},
		"a missing app binary exits before it is observed": {
			argv: []string{"/nonexistent/app"}, afterStart: 300 * time.Millisecond,
			want: outcome.ExitedBeforeObserved, wantExit: &outcome.Exit{Result: "exit-code", Code: standInNoExec},
		},
		"a missing trampoline is NotStarted": {
			argv: []string{"/bin/sleep", "1000"}, trampoline: "/nonexistent/unitlet",
			want: outcome.NotStarted, wantErr: "did not exec",
			wantExitBy: map[string]*outcome.Exit{"systemd": {Result: "exit-code", Code: 203}},
		},
		"a start sent is answered past its caller's end": {
			argv: []string{"/bin/sleep", "1000"}, stopsOnceSent: true, want: outcome.Running,
		},
		"a start whose context has ended is not sent": {
			argv: []string{"/bin/sleep", "1000"}, cancelled: true,
			want: outcome.NotStarted, wantErr: "context canceled",
		},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b := be.new(t, 5*time.Second)
		if tc.trampoline != "" {
			be.trampoline(b, tc.trampoline)
		}
		if tc.afterStart > 0 {
			be.afterStart(b, func() { time.Sleep(tc.afterStart) })
		}
		p := makeProc(t, be.lay, fmt.Sprintf("start%d", i), 1, tc.argv...)
		t.Cleanup(func() {
			if k := b.Prove(context.Background(), p); !k.Proven {
				t.Errorf("cleanup: %s not proven gone: %v", p.UnitName(), k.Err())
			}
		})
		sctx := ctx
		if tc.cancelled || tc.stopsOnceSent {
			c, cancel := context.WithCancel(ctx)
			defer cancel()
			if tc.cancelled {
				cancel()
			} else {
				be.afterSend(b, cancel)
			}
			sctx = c
		}
		got := b.Start(sctx, Spec{Slot: p, Grace: time.Second})
		if diff := cmp.Diff(tc.want.String(), got.Kind.String()); diff != "" {
			t.Fatalf("kind (-want,+got):\n%s\ncause: %v", diff, got.Cause)
		}
		wantExit := tc.wantExit
		if e, ok := tc.wantExitBy[be.name]; ok {
			wantExit = e
		}
		if diff := cmp.Diff(wantExit, got.Exit, cmpopts.IgnoreFields(outcome.Exit{}, "At")); diff != "" {
			t.Errorf("exit (-want,+got):\n%s", diff)
		}
		err := got.Err()
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, outcome.KindOf(err)); diff != "" {
			t.Errorf("KindOf(Err()) (-want,+got):\n%s", diff)
		}
		if tc.want == outcome.Running && (len(got.InvocationID) != 32 || got.MainPID == 0) {
			t.Errorf("Running without invocation id / pid: %+v", got)
		}
		if tc.want == outcome.Running {
			// The start says where it runs, as a look would: the node
			// takes the cgroup from it and does not look again.
			if st, err := b.Observe(ctx, p); err != nil || st.Cgroup == "" || st.Cgroup != got.Cgroup {
				t.Errorf("started in cgroup %q; observed %+v %v", got.Cgroup, st, err)
			}
		}
		if tc.want == outcome.NotStarted {
			// Proven not started: nothing of it is left running.
			st, err := b.Observe(ctx, p)
			if err != nil || !st.Gone() {
				t.Errorf("after NotStarted: %+v %v, want gone", st, err)
			}
		}
	})
}

func TestStopKillProve(t *testing.T) {
	const ignoreTerm = `trap "" TERM; /bin/sleep 1000 & echo > READY; wait`
	tests := map[string]struct {
		argv  []string
		grace time.Duration
		// act is what ends the unit before the proof.
		act func(ctx context.Context, b Backend, p layout.Slot) error
		// minTook is the least the act may take.
		minTook time.Duration
	}{
		"stop ends an app that obeys SIGTERM": {
			argv: []string{"/bin/sleep", "1000"}, grace: 10 * time.Second,
			act: func(ctx context.Context, b Backend, p layout.Slot) error { return b.Stop(ctx, p) },
		},
		"stop kills an app that ignores SIGTERM after the grace": {
			argv: []string{"/bin/sh", "-c", ignoreTerm}, grace: 300 * time.Millisecond, minTook: 300 * time.Millisecond,
			act: func(ctx context.Context, b Backend, p layout.Slot) error { return b.Stop(ctx, p) },
		},
		"kill ends an app that ignores SIGTERM at once": {
			argv: []string{"/bin/sh", "-c", ignoreTerm}, grace: time.Hour,
			act: func(ctx context.Context, b Backend, p layout.Slot) error { return b.Kill(ctx, p) },
		},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := be.new(t, 10*time.Second)
		iname := fmt.Sprintf("stop%d", i)
		inst, err := be.lay.Instance("ns1", iname)
		if err != nil {
			t.Fatal(err)
		}
		ready := filepath.Join(inst.RunDir(), "ready")
		argv := append([]string(nil), tc.argv...)
		argv[len(argv)-1] = strings.ReplaceAll(argv[len(argv)-1], "READY", ready)
		p := makeProc(t, be.lay, iname, 1, argv...)
		got := b.Start(ctx, Spec{Slot: p, Grace: tc.grace})
		if got.Kind != outcome.Running {
			t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		t.Cleanup(func() { b.Prove(context.Background(), p) })
		if strings.Contains(tc.argv[len(tc.argv)-1], "READY") {
			waitFile(t, ready)
		}
		st, err := b.Observe(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.ActiveState != "active" || st.InvocationID != got.InvocationID || st.MainPID != got.MainPID || st.Slot == nil || st.Slot.UnitName() != p.UnitName() {
			t.Fatalf("Observe = %+v, want the running unit of %+v", st, got)
		}
		t0 := time.Now()
		if err := tc.act(ctx, b, p); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took < tc.minTook {
			t.Errorf("returned after %v, before %v", took, tc.minTook)
		}
		if k := b.Prove(ctx, p); !k.Proven {
			t.Fatalf("Prove: %v", k.Err())
		}
		after, err := b.Observe(ctx, p)
		if err != nil || !after.Gone() {
			t.Errorf("after the proof: %+v %v, want gone", after, err)
		}
		if n, err := populated(be.cgroupDirs(st.Cgroup)); err != nil || n != 0 {
			t.Errorf("after a proven kill the cgroup holds %d process(es) (%v)", n, err)
		}
	})
}

func TestExitRecords(t *testing.T) {
	tests := map[string]struct {
		script string
		want   outcome.Exit
	}{
		"an exit code":      {script: "exit 3", want: outcome.Exit{Result: "exit-code", Code: 3}},
		"a signal":          {script: "kill -USR1 $$", want: outcome.Exit{Result: "signal", Signal: 10}},
		"a clean exit":      {script: "exit 0", want: outcome.Exit{Result: "success"}},
		"a SIGKILL of main": {script: "kill -KILL $$", want: outcome.Exit{Result: "signal", Signal: 9}},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := be.new(t, 10*time.Second)
		p := makeProc(t, be.lay, fmt.Sprintf("exit%d", i), 1, "/bin/sh", "-c", "sleep 0.2; "+tc.script)
		got := b.Start(ctx, Spec{Slot: p})
		if got.Kind != outcome.Running {
			t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		t.Cleanup(func() { b.Prove(context.Background(), p) })
		st := waitGone(ctx, t, b, p)
		if st.Exit == nil {
			t.Fatalf("gone without an exit: %+v", st)
		}
		gotExit := *st.Exit
		gotExit.At = time.Time{}
		if diff := cmp.Diff(tc.want, gotExit); diff != "" {
			t.Errorf("observed exit (-want,+got):\n%s", diff)
		}
		var rec record.Exit
		if err := record.Read(p.Instance().ExitDir(), record.Name(p, record.ExitSuffix), &rec); err != nil {
			t.Fatal(err)
		}
		gotRec := outcome.Exit{Result: rec.Result, Code: rec.Code, Signal: rec.Signal}
		if diff := cmp.Diff(tc.want, gotRec); diff != "" {
			t.Errorf("exit record (-want,+got):\n%s", diff)
		}
		if rec.By != be.writer || rec.InvocationID != got.InvocationID || rec.At.IsZero() {
			t.Errorf("exit record by %q, invocation %q at %v; want by %q, invocation %q", rec.By, rec.InvocationID, rec.At, be.writer, got.InvocationID)
		}
	})
}

// waitGone polls until the unit is gone.
func waitGone(ctx context.Context, t *testing.T, b Backend, p layout.Slot) Status {
	t.Helper()
	for {
		st, err := b.Observe(ctx, p)
		if err == nil && st.Gone() {
			return st
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never gone: %+v %v", p.UnitName(), st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProofCutShort(t *testing.T) {
	tests := map[string]struct {
		budget   time.Duration
		shutdown bool
		want     outcome.KillReason
	}{
		"the budget ends a proof of an app that ignores SIGTERM": {
			budget: 300 * time.Millisecond, want: outcome.ProofTimedOut,
		},
		"shutdown cancels the running proof at once": {
			budget: time.Hour, shutdown: true, want: outcome.Cancelled,
		},
	}
	eachCase(t, tests, func(t *testing.T, be testBackend, i int, name string) {
		tc := tests[name]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := be.new(t, tc.budget)
		unit := fmt.Sprintf("cut%d", i)
		inst, err := be.lay.Instance("ns1", unit)
		if err != nil {
			t.Fatal(err)
		}
		ready := filepath.Join(inst.RunDir(), "ready")
		p := makeProc(t, be.lay, unit, 1, "/bin/sh", "-c", `trap "" TERM; /bin/sleep 1000 & echo > `+ready+`; wait`)
		if got := b.Start(ctx, Spec{Slot: p, Grace: time.Hour}); got.Kind != outcome.Running {
			t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		waitFile(t, ready)
		t.Cleanup(func() {
			cleaner := be.new(t, 10*time.Second)
			_ = cleaner.Kill(context.Background(), p)
			if k := cleaner.Prove(context.Background(), p); !k.Proven {
				t.Errorf("cleanup: %v", k.Err())
			}
		})
		done := make(chan outcome.Kill, 1)
		go func() { done <- b.Prove(ctx, p) }()
		if tc.shutdown {
			waitProofRunning(t, be.proofs(b))
			sd, cancel := context.WithCancel(context.Background())
			cancel()
			b.Shutdown(sd)
		}
		select {
		case k := <-done:
			if k.Proven {
				t.Fatalf("a proof of a live app came back Proven")
			}
			if diff := cmp.Diff(tc.want, k.Reason); diff != "" {
				t.Errorf("reason (-want,+got):\n%s\nerr: %v", diff, k.Err())
			}
			if !errors.Is(k.Err(), outcome.ErrKillUnproven) {
				t.Errorf("Err() is not ErrKillUnproven")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the proof was not cut short")
		}
	})
}

// waitFile waits until the app has written p: its SIGTERM trap is set.
func waitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}

func waitProofRunning(t *testing.T, p *proofs) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		n := len(p.cancels)
		p.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("proof never started")
}
