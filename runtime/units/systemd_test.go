package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// Refusals only the systemd backend has (the shared ones are in
// TestStartOutcomes).
func TestSystemdStartRefusals(t *testing.T) {
	env := newSDEnv(t)
	tests := map[string]struct {
		exe      string
		wantErr  string
		wantExit *outcome.Exit
	}{
		"a trampoline that is not there is NotStarted": {
			exe: "/nonexistent/unitlet", wantErr: "did not exec (status 203)",
			wantExit: &outcome.Exit{Result: "exit-code", Code: 203},
		},
		"a relative trampoline is refused before anything is sent": {
			exe: "unitlet", wantErr: "must be absolute",
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
			p := env.proc(t, fmt.Sprintf("refuse%d", i), 1, "/bin/sleep", "1000")
			t.Cleanup(func() { b.Prove(context.Background(), p) })
			got := b.Start(ctx, Spec{Slot: p})
			if diff := cmp.Diff(outcome.NotStarted.String(), got.Kind.String()); diff != "" {
				t.Fatalf("kind (-want,+got):\n%s\ncause: %v", diff, got.Cause)
			}
			if diff := cmp.Diff(tc.wantExit, got.Exit, cmpopts.IgnoreFields(outcome.Exit{}, "At")); diff != "" {
				t.Errorf("exit (-want,+got):\n%s", diff)
			}
			if err := got.Err(); err == nil || !strings.Contains(err.Error(), tc.wantErr) || outcome.MightHaveRun(err) {
				t.Errorf("error %v, want a refusal containing %q", err, tc.wantErr)
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
	got := b.Start(ctx, Spec{Slot: p, Tier: tier, Parent: parent, Grace: 2 * time.Second, Delegate: true})
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
		"Slice": sp["Slice"], "NoNewPrivileges": sp["NoNewPrivileges"],
	}
	want := map[string]any{
		"MemoryMax": uint64(96 << 20), "TasksMax": uint64(40), "CPUQuotaPerSecUSec": uint64(500_000),
		"KillMode": "control-group", "TimeoutStopUSec": uint64(2_000_000), "Type": "exec",
		"Slice": p.Instance().SliceName(), "NoNewPrivileges": true,
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
	if err := b.RaiseParent(ctx, p.Instance(), cgroups.Tier{MemoryBytes: 384 << 20}); err != nil {
		t.Fatal(err)
	}
	sliceMem := filepath.Join(env.sys.HostCgroup("memory", filepath.Dir(st.Cgroup)), "memory.limit_in_bytes")
	if diff := cmp.Diff(fmt.Sprintln(384<<20), readFile(t, sliceMem)); diff != "" {
		t.Errorf("raised slice limit (-want,+got):\n%s", diff)
	}
	if err := b.RestoreParent(ctx, p.Instance(), cgroups.Tier{MemoryBytes: 192 << 20}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fmt.Sprintln(192<<20), readFile(t, sliceMem)); diff != "" {
		t.Errorf("restored slice limit (-want,+got):\n%s", diff)
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

func TestSystemdRoleUnitSharesTheSlice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	g1 := env.proc(t, "roles", 1, "/bin/sleep", "1000")
	inst := g1.Instance()
	side, err := inst.Sidecar("side")
	if err != nil {
		t.Fatal(err)
	}
	f := launch.File{Schema: launch.Schema, Host: "roles.example.com", Argv: []string{"/bin/sleep", "1000"}}
	if err := launch.Write(inst.PrivateDir(), side.LaunchFile(), f); err != nil {
		t.Fatal(err)
	}
	for _, p := range []layout.Slot{g1, side} {
		if got := b.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
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

// RemoveParent refuses while the slice holds a process, then stops the
// slice so its cgroup goes, and is safe to repeat.
func TestSystemdRemoveParent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	p := env.proc(t, "removeparent", 1, "/bin/sleep", "1000")
	if got := b.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	st, err := b.Observe(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	sliceDirs := env.config(time.Second, t).CgroupDirs(filepath.Dir(st.Cgroup))

	if err := b.RemoveParent(ctx, p.Instance()); !errors.Is(err, ErrSliceBusy) {
		t.Fatalf("RemoveParent with a running unit = %v, want ErrSliceBusy", err)
	}
	if got, err := b.Observe(ctx, p); err != nil || got.Gone() {
		t.Fatalf("a refused RemoveParent touched the unit: %+v, %v", got, err)
	}
	if k := b.Prove(ctx, p); !k.Proven {
		t.Fatalf("prove: %v", k.Err())
	}
	for i := range 2 {
		if err := b.RemoveParent(ctx, p.Instance()); err != nil {
			t.Fatalf("RemoveParent #%d after the proof: %v", i+1, err)
		}
	}
	up, err := env.conn(t).GetUnitPropertiesContext(ctx, p.Instance().SliceName())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("inactive", up["ActiveState"]); diff != "" {
		t.Errorf("slice state (-want,+got):\n%s", diff)
	}
	for _, d := range sliceDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("slice cgroup %s still there (%v)", d, err)
		}
	}
}

// A proven unit that failed leaves no failed unit behind on the host
// (node monitoring counts them), and how it ended is still observed, from
// its exit record.
func TestSystemdProofResetsFailedUnit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	p := env.proc(t, "failing", 1, "/bin/sh", "-c", "sleep 0.1; exit 3")
	if got := b.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	c := env.conn(t)
	failedUnits := func() []string {
		us, err := c.ListUnitsFilteredContext(ctx, []string{"failed"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range us {
			names = append(names, u.Name)
		}
		return names
	}
	if st := waitGone(ctx, t, b, p); st.ActiveState != "failed" || !slices.Contains(failedUnits(), p.UnitName()) {
		t.Fatalf("before the proof: %s, failed units %v; want %s failed", st.ActiveState, failedUnits(), p.UnitName())
	}
	if k := b.Prove(ctx, p); !k.Proven {
		t.Fatalf("prove: %v", k.Err())
	}
	if got := failedUnits(); slices.Contains(got, p.UnitName()) {
		t.Errorf("after the proof, failed units %v still hold %s", got, p.UnitName())
	}
	st, err := b.Observe(ctx, p)
	if err != nil || !st.Gone() || st.Exit == nil || st.Exit.Code != 3 {
		t.Errorf("observed after the proof: %+v %v, want gone with exit code 3", st, err)
	}
}

// An agent that maps the unit's cgroup to directories that are not there
// (the wrong hierarchy layout) cannot see it empty: the proof and the
// slice's removal are refused, not granted on "no such directory".
func TestSystemdProofRefusesAnUnseenCgroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	good := env.backend(t, 5*time.Second)
	cfg := env.config(time.Second, t)
	nowhere := t.TempDir()
	cfg.CgroupDirs = func(cg string) []string { return []string{filepath.Join(nowhere, cg)} }
	blind, err := NewSystemd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(blind.Close)
	p := env.proc(t, "blind", 1, "/bin/sleep", "1000")
	if got := good.Start(ctx, Spec{Slot: p}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { good.Prove(context.Background(), p) })

	k := blind.Prove(ctx, p)
	if k.Proven || k.Reason != outcome.NoDelegation {
		t.Fatalf("prove through a wrong mapping = %+v, want unproven NoDelegation", k)
	}
	if err := blind.RemoveParent(ctx, p.Instance()); err == nil {
		t.Fatal("RemoveParent through a wrong mapping succeeded")
	}
	if k := good.Prove(ctx, p); !k.Proven {
		t.Fatalf("prove with the host's mapping: %v", k.Err())
	}
}
