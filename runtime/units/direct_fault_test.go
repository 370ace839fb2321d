package units

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// starterArgs is what the starter child process needs: an agent that
// starts one unit and stops (forever) at a chosen point of the start.
type starterArgs struct {
	Layout     layout.Layout
	Exe        string
	Name       string
	Generation int64
	// Stop is "before-shim" or "after-shim".
	Stop string
}

// starterMain is the agent in a child process: it prints "stopped" at
// its stop point and waits there to be SIGKILLed by the test.
func starterMain(args []string) int {
	var a starterArgs
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &a) != nil {
		return 2
	}
	b, err := NewDirect(DirectConfig{Layout: a.Layout, Exe: a.Exe, ProofBudget: time.Minute, Log: logr.Discard()})
	if err != nil {
		fmt.Println("error", err)
		return 3
	}
	park := func() {
		fmt.Println("stopped")
		select {}
	}
	switch a.Stop {
	case "before-shim":
		b.beforeShim = park
	case "after-shim":
		b.afterShim = func(int) { park() }
	}
	inst, err := a.Layout.Instance("ns1", a.Name)
	if err != nil {
		return 4
	}
	p, err := inst.Generation(a.Generation)
	if err != nil {
		return 4
	}
	st := b.Start(context.Background(), Spec{Slot: p, Grace: time.Second})
	fmt.Println("returned", st.Kind)
	return 0
}

// The agent side is SIGKILLed in the middle of a start; a new agent
// re-adopts the unit from the cgroups and records alone, and never calls
// it NotStarted.
func TestDirectStarterKilledMidStart(t *testing.T) {
	tests := map[string]struct {
		stop string
		// want are the outcomes a restarted agent may read at once.
		want []outcome.StartKind
		// runs: the shim carries on and the unit ends up Running.
		runs bool
	}{
		"killed after the start record, before the shim": {
			stop: "before-shim", want: []outcome.StartKind{outcome.MayHaveRun},
		},
		"killed after the shim was exec'd, before its report": {
			stop: "after-shim", want: []outcome.StartKind{outcome.MayHaveRun, outcome.Running}, runs: true,
		},
	}
	env := newDEnv(t)
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			iname := fmt.Sprintf("starter%d", i)
			p := makeProc(t, env.lay, iname, 1, "/bin/sleep", "1000")
			later := env.backend(t, 10*time.Second)
			t.Cleanup(func() {
				if k := later.Prove(context.Background(), p); !k.Proven {
					t.Errorf("cleanup: %v", k.Err())
				}
			})
			arg, _ := json.Marshal(starterArgs{Layout: env.lay, Exe: env.exe, Name: iname, Generation: 1, Stop: tc.stop})
			cmd := exec.Command(env.exe, "starter", string(arg))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "stopped" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("starter said %q (%v)", line, err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			// The restarted agent: List finds the unit through its records.
			sts, err := later.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var found *Status
			for i := range sts {
				if sts[i].Unit == p.UnitName() {
					found = &sts[i]
				}
			}
			if found == nil {
				t.Fatalf("List did not re-adopt %s: %+v", p.UnitName(), sts)
			}
			o := found.StartOutcome()
			if !cmp.Equal(tc.want, []outcome.StartKind{o.Kind}) && !(len(tc.want) == 2 && (o.Kind == tc.want[0] || o.Kind == tc.want[1])) {
				t.Errorf("re-adopted as %v (%+v), want one of %v", o.Kind, *found, tc.want)
			}
			if o.Kind == outcome.NotStarted || !outcome.MightHaveRun(o.Err()) {
				t.Errorf("re-adopted as proven not started: %v", o.Err())
			}
			if tc.runs {
				// The shim outlived its agent: it runs, with its records.
				for {
					st, err := later.Observe(ctx, p)
					if err == nil && st.StartOutcome().Kind == outcome.Running {
						if st.MainPID == 0 || len(st.InvocationID) != 32 {
							t.Errorf("running without pid or invocation: %+v", st)
						}
						break
					}
					if ctx.Err() != nil {
						t.Fatalf("never Running: %+v %v", st, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if k := later.Prove(ctx, p); !k.Proven {
				t.Fatalf("a later Prove did not resolve it: %v", k.Err())
			}
		})
	}
}

// A shim that started the trampoline but cannot write its pid record
// reports that the start may have run, and leaves nothing running.
func TestDirectPidRecordUnwritable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newDEnv(t)
	b := env.backend(t, 10*time.Second)
	p := makeProc(t, env.lay, "nopid", 1, "/bin/sleep", "1000")
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	// A directory where the record's file must go: the rename fails.
	if err := os.Mkdir(filepath.Join(p.Instance().ExitDir(), record.Name(p, record.PidSuffix)), 0o700); err != nil {
		t.Fatal(err)
	}
	got := b.Start(ctx, Spec{Slot: p})
	if diff := cmp.Diff(outcome.MayHaveRun.String(), got.Kind.String()); diff != "" {
		t.Fatalf("kind (-want,+got):\n%s\ncause: %v", diff, got.Cause)
	}
	if !strings.Contains(got.Cause.Error(), "pid record") {
		t.Errorf("cause %v does not name the pid record", got.Cause)
	}
}

// A unit started by one backend is found, running, by another (a
// restarted agent) and proven gone by it.
func TestDirectReadoptsAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newDEnv(t)
	first := env.backend(t, 10*time.Second)
	p := makeProc(t, env.lay, "readopt", 4, "/bin/sleep", "1000")
	got := first.Start(ctx, Spec{Slot: p, Grace: time.Second})
	if got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	second := env.backend(t, 10*time.Second)
	t.Cleanup(func() { second.Prove(context.Background(), p) })
	sts, err := second.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Unit, Kind, Invocation string
		PID                    int
	}
	var gotSeen []seen
	for _, st := range sts {
		o := st.StartOutcome()
		gotSeen = append(gotSeen, seen{st.Unit, o.Kind.String(), o.InvocationID, o.MainPID})
	}
	want := []seen{{p.UnitName(), "Running", got.InvocationID, got.MainPID}}
	if diff := cmp.Diff(want, gotSeen); diff != "" {
		t.Errorf("re-adopted (-want,+got):\n%s", diff)
	}
	if k := second.Prove(ctx, p); !k.Proven {
		t.Fatalf("prove: %v", k.Err())
	}
	st, err := second.Observe(ctx, p)
	if err != nil || !st.Gone() || st.Exit == nil || st.Exit.Signal != int(syscall.SIGTERM) {
		t.Errorf("after the proof: %+v (exit %+v) %v; want gone by SIGTERM", st, st.Exit, err)
	}
}
