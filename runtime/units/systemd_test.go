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

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestSystemdStartOutcomes(t *testing.T) {
	env := newSDEnv(t)
	tests := map[string]struct {
		argv []string
		// exe overrides the trampoline path.
		exe       string
		user      string
		afterJob  time.Duration
		cancelled bool
		want      outcome.StartKind
		wantExit  *outcome.Exit
		wantErr   string // substring of the start's error
	}{
		"a long-running app is Running": {
			argv: []string{"/bin/sleep", "1000"}, want: outcome.Running,
		},
		"an app that exits at once is ExitedBeforeObserved": {
			argv: []string{"/bin/sh", "-c", "exit 7"}, afterJob: 300 * time.Millisecond,
			want: outcome.ExitedBeforeObserved, wantExit: &outcome.Exit{Result: "exit-code", Code: 7},
			wantErr: "exited before it was observed",
		},
		"a missing app binary exits before it is observed": {
			argv: []string{"/nonexistent/app"}, afterJob: 300 * time.Millisecond,
			want: outcome.ExitedBeforeObserved, wantExit: &outcome.Exit{Result: "exit-code", Code: standInNoExec},
		},
		"a missing trampoline is NotStarted": {
			argv: []string{"/bin/sleep", "1000"}, exe: "/nonexistent/unitlet",
			want: outcome.NotStarted, wantErr: "did not exec (status 203)",
			wantExit: &outcome.Exit{Result: "exit-code", Code: 203},
		},
		"an unknown user is NotStarted": {
			argv: []string{"/bin/sleep", "1000"}, user: "unitlet-no-such-user",
			want: outcome.NotStarted, wantErr: "did not exec (status 217)",
			wantExit: &outcome.Exit{Result: "exit-code", Code: 217},
		},
		"a start whose context has ended is not sent": {
			argv: []string{"/bin/sleep", "1000"}, cancelled: true,
			want: outcome.NotStarted, wantErr: "context canceled",
		},
		"a relative trampoline is refused before anything is sent": {
			argv: []string{"/bin/sleep", "1000"}, exe: "unitlet",
			want: outcome.NotStarted, wantErr: "must be absolute",
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b := env.backend(t, 5*time.Second)
			if tc.exe != "" {
				b.cfg.Exe = tc.exe
			}
			if tc.afterJob > 0 {
				b.afterJob = func() { time.Sleep(tc.afterJob) }
			}
			p := env.proc(t, fmt.Sprintf("start%d", i), 1, tc.argv...)
			t.Cleanup(func() {
				if k := b.Prove(context.Background(), p); !k.Proven {
					t.Errorf("cleanup: %s not proven gone: %v", p.UnitName(), k.Err())
				}
			})
			sctx := ctx
			if tc.cancelled {
				c, cancel := context.WithCancel(ctx)
				cancel()
				sctx = c
			}
			got := b.Start(sctx, Spec{Proc: p, User: tc.user, Grace: time.Second})
			if diff := cmp.Diff(tc.want.String(), got.Kind.String()); diff != "" {
				t.Fatalf("kind (-want,+got):\n%s\ncause: %v", diff, got.Cause)
			}
			if diff := cmp.Diff(tc.wantExit, got.Exit); diff != "" {
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
		})
	}
}

func TestSystemdLimitsStopAndProve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	p := env.proc(t, "limits", 3, "/bin/sleep", "1000")
	tier := cgroups.Tier{MemoryBytes: 96 << 20, Pids: 40, CPUMillis: 500}
	parent := cgroups.Tier{MemoryBytes: 192 << 20, Pids: 80}
	got := b.Start(ctx, Spec{Proc: p, Tier: tier, Parent: parent, Grace: 2 * time.Second, Delegate: true})
	if got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), p) })

	c := env.conn(t)
	sp, err := c.GetUnitTypePropertiesContext(ctx, p.UnitName(), "Service")
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]any{
		"MemoryMax": sp["MemoryMax"], "TasksMax": sp["TasksMax"], "CPUQuotaPerSecUSec": sp["CPUQuotaPerSecUSec"],
		"KillMode": sp["KillMode"], "TimeoutStopUSec": sp["TimeoutStopUSec"], "Type": sp["Type"],
		"Slice": sp["Slice"], "NoNewPrivileges": sp["NoNewPrivileges"], "ProtectSystem": sp["ProtectSystem"],
		"PrivateTmp": sp["PrivateTmp"],
	}
	want := map[string]any{
		"MemoryMax": uint64(96 << 20), "TasksMax": uint64(40), "CPUQuotaPerSecUSec": uint64(500_000),
		"KillMode": "control-group", "TimeoutStopUSec": uint64(2_000_000), "Type": "exec",
		"Slice": p.Instance().SliceName(), "NoNewPrivileges": true, "ProtectSystem": "strict",
		"PrivateTmp": true,
	}
	if diff := cmp.Diff(want, props); diff != "" {
		t.Errorf("unit properties (-want,+got):\n%s", diff)
	}

	if diff := cmp.Diff(true, sp["Delegate"]); diff != "" {
		t.Errorf("Delegate (-want,+got):\n%s", diff)
	}

	st, err := b.Observe(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gone() || st.InvocationID != got.InvocationID || st.MainPID != got.MainPID {
		t.Errorf("Observe = %+v, want the running unit of %+v", st, got)
	}
	files := map[string]string{
		"unit memory.limit_in_bytes":  readFile(t, filepath.Join(env.sys.HostCgroup("memory", st.Cgroup), "memory.limit_in_bytes")),
		"unit pids.max":               readFile(t, filepath.Join(env.sys.HostCgroup("pids", st.Cgroup), "pids.max")),
		"slice memory.limit_in_bytes": readFile(t, filepath.Join(env.sys.HostCgroup("memory", filepath.Dir(st.Cgroup)), "memory.limit_in_bytes")),
	}
	wantFiles := map[string]string{
		"unit memory.limit_in_bytes":  fmt.Sprintln(96 << 20),
		"unit pids.max":               "40\n",
		"slice memory.limit_in_bytes": fmt.Sprintln(192 << 20),
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("host cgroup files (-want,+got):\n%s", diff)
	}

	// The overlap raise and its restore land on the slice.
	if err := b.SetParentLimit(ctx, p.Instance(), cgroups.Tier{MemoryBytes: 384 << 20}); err != nil {
		t.Fatal(err)
	}
	sliceMem := filepath.Join(env.sys.HostCgroup("memory", filepath.Dir(st.Cgroup)), "memory.limit_in_bytes")
	if diff := cmp.Diff(fmt.Sprintln(384<<20), readFile(t, sliceMem)); diff != "" {
		t.Errorf("raised slice limit (-want,+got):\n%s", diff)
	}

	if err := b.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Observe(ctx, p); err != nil || !st.Gone() {
		t.Errorf("after Stop: %+v, %v; want gone", st, err)
	}
	if k := b.Prove(ctx, p); !k.Proven {
		t.Errorf("Prove after Stop: %v", k.Err())
	}
}

func TestSystemdKillThenProve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	// The app ignores SIGTERM (and so does its child): only a kill ends it.
	p := env.proc(t, "kill", 1, "/bin/sh", "-c", `trap "" TERM; /bin/sleep 1000 & wait`)
	if got := b.Start(ctx, Spec{Proc: p, Grace: time.Hour}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	st, err := b.Observe(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(ctx, p); err != nil {
		t.Fatal(err)
	}
	if k := b.Prove(ctx, p); !k.Proven {
		t.Fatalf("Prove after Kill: %v", k.Err())
	}
	if n, err := populated([]string{env.sys.HostCgroup("memory", st.Cgroup), env.sys.HostCgroup("systemd", st.Cgroup)}); err != nil || n != 0 {
		t.Errorf("after a proven kill the cgroup holds %d process(es) (%v)", n, err)
	}
}

func TestSystemdProofCutShort(t *testing.T) {
	env := newSDEnv(t)
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
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := env.backend(t, tc.budget)
			name := fmt.Sprintf("cut%d", i)
			inst, err := env.lay.Instance("ns1", name)
			if err != nil {
				t.Fatal(err)
			}
			ready := filepath.Join(inst.RunDir(), "ready")
			p := env.proc(t, name, 1, "/bin/sh", "-c", `trap "" TERM; /bin/sleep 1000 & echo > `+ready+`; wait`)
			if got := b.Start(ctx, Spec{Proc: p, Grace: time.Hour}); got.Kind != outcome.Running {
				t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
			}
			waitFile(t, ready)
			t.Cleanup(func() {
				cleaner := env.backend(t, 10*time.Second)
				_ = cleaner.Kill(context.Background(), p)
				if k := cleaner.Prove(context.Background(), p); !k.Proven {
					t.Errorf("cleanup: %v", k.Err())
				}
			})
			done := make(chan outcome.Kill, 1)
			go func() { done <- b.Prove(ctx, p) }()
			if tc.shutdown {
				waitProofRunning(t, b.proofs)
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

func TestSystemdList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	want := map[string]bool{}
	for n := uint64(1); n <= 2; n++ {
		p := env.proc(t, "list", n, "/bin/sleep", "1000")
		if got := b.Start(ctx, Spec{Proc: p}); got.Kind != outcome.Running {
			t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
		}
		t.Cleanup(func() { b.Prove(context.Background(), p) })
		want[p.UnitName()] = true
	}
	sts, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, st := range sts {
		got[st.Unit] = !st.Gone()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed units, running (-want,+got):\n%s", diff)
	}
}

func TestSystemdStopKillsAfterGrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 10*time.Second)
	inst, err := env.lay.Instance("ns1", "grace")
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(inst.RunDir(), "ready")
	p := env.proc(t, "grace", 1, "/bin/sh", "-c", `trap "" TERM; /bin/sleep 1000 & echo > `+ready+`; wait`)
	const grace = 300 * time.Millisecond
	if got := b.Start(ctx, Spec{Proc: p, Grace: grace}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	waitFile(t, ready)
	t0 := time.Now()
	if err := b.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < grace {
		t.Errorf("Stop of an app that ignores SIGTERM returned after %v, before the %v grace", took, grace)
	}
	if k := b.Prove(ctx, p); !k.Proven {
		t.Errorf("after Stop: %v", k.Err())
	}
}

func TestSystemdRoleUnitSharesTheSlice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	g1 := env.proc(t, "roles", 1, "/bin/sleep", "1000")
	inst := g1.Instance()
	side, err := inst.Proc(layout.RoleSidecar, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := launch.File{Schema: launch.Schema, Host: "roles.example.com", Argv: []string{"/bin/sleep", "1000"}}
	if err := launch.Write(inst.DataDir(), side.LaunchFile(), f); err != nil {
		t.Fatal(err)
	}
	for _, p := range []layout.Proc{g1, side} {
		if got := b.Start(ctx, Spec{Proc: p}); got.Kind != outcome.Running {
			t.Fatalf("start %s: %v (%v)", p.UnitName(), got.Kind, got.Cause)
		}
		t.Cleanup(func() { b.Prove(context.Background(), p) })
	}
	sg, err := b.Observe(ctx, g1)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := b.Observe(ctx, side)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(filepath.Dir(sg.Cgroup), filepath.Dir(ss.Cgroup)); diff != "" {
		t.Errorf("the sidecar's cgroup is not in the generation's slice (-want,+got):\n%s", diff)
	}
	// Proving the sidecar gone touches no sibling.
	if k := b.Prove(ctx, side); !k.Proven {
		t.Fatalf("prove sidecar: %v", k.Err())
	}
	if st, err := b.Observe(ctx, g1); err != nil || st.Gone() {
		t.Errorf("generation 1 after the sidecar's proof: %+v %v, want running", st, err)
	}
}
