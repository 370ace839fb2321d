package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// TestRun: a run gets its generation's environment, its streams apart and
// its exit code, in a cgroup child of its own; a second runs beside it;
// one whose caller goes away is stopped and proven gone; none leaves a
// file behind.
func TestRun(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gen := e.appRequest("runs", 1)
	e.retireAtEnd(t, gen.Ref)
	if res := e.node.Start(ctx, gen); res.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", res.Start.Kind, res.Start.Cause)
	}
	runIn := func(ctx context.Context, stdin io.Reader, name string, argv ...string) (RunResult, string, string) {
		// Read once Run returned: it waits until the streams are copied.
		var out, errs bytes.Buffer
		res := e.node.Run(ctx, RunRequest{InstanceRef: gen.InstanceRef, Name: name, Generation: 1, Argv: argv,
			Stdin: stdin, Stdout: &out, Stderr: &errs, Grace: time.Second})
		return res, out.String(), errs.String()
	}
	run := func(ctx context.Context, name string, argv ...string) (RunResult, string, string) {
		return runIn(ctx, nil, name, argv...)
	}

	tests := map[string]struct {
		argv             []string
		stdin            string
		wantOut, wantErr string
		wantCode         int
	}{
		"stdin": {
			argv: []string{"/bin/sh", "-c", "wc -l"}, stdin: "a\nb\n", wantOut: "2\n",
		},
		"no stdin is an empty one": {
			argv: []string{"/bin/cat"},
		},
		"env and streams apart": {
			argv:    []string{"/bin/sh", "-c", `echo "$UNITLET_GENERATION $GREETING"; echo oops >&2; exit 3`},
			wantOut: "1 hi\n", wantErr: "oops\n", wantCode: 3,
		},
		"own cgroup child": {
			argv:    []string{"/bin/sh", "-c", `grep -c /role-cmd-run-b$ /proc/self/cgroup >/dev/null && echo own`},
			wantOut: "own\n",
		},
		"not found": {
			argv:     []string{"/no/such/command"},
			wantCode: 127,
		},
	}
	names := map[string]string{"env and streams apart": "run-a", "own cgroup child": "run-b", "not found": "run-c",
		"stdin": "run-d", "no stdin is an empty one": "run-e"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdin io.Reader
			if tc.stdin != "" {
				stdin = strings.NewReader(tc.stdin)
			}
			res, out, errs := runIn(ctx, stdin, names[name], tc.argv...)
			if !res.Kill.Proven || res.Stopped || res.Exit == nil {
				t.Fatalf("run: start %v (%v), stopped %v, kill %v, exit %+v", res.Start.Kind, res.Start.Cause, res.Stopped, res.Kill.Err(), res.Exit)
			}
			got := struct {
				Out, Err string
				Code     int
			}{out, errs, res.Exit.Code}
			want := struct {
				Out, Err string
				Code     int
			}{tc.wantOut, tc.wantErr, tc.wantCode}
			if tc.wantCode == 127 {
				want.Err = got.Err // the trampoline says why, in its own words
				if !strings.Contains(errs, "/no/such/command") {
					t.Errorf("stderr %q does not name the command", errs)
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			e.expectForgotten(t, gen.InstanceRef, names[name])
		})
	}

	t.Run("interrupted beside another", func(t *testing.T) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan RunResult)
		up := &firstWrite{seen: make(chan struct{})}
		go func() {
			done <- e.node.Run(rctx, RunRequest{InstanceRef: gen.InstanceRef, Name: "run-long", Generation: 1,
				Argv: []string{"/bin/sh", "-c", "echo up; exec sleep 300"}, Stdout: up, Stderr: io.Discard, Grace: time.Second})
		}()
		// The second run starts and ends while the first runs: once the
		// first has said so, not merely been asked for.
		select {
		case <-up.seen:
		case res := <-done:
			t.Fatalf("the long run ended before it ran: %v (%v)", res.Start.Kind, res.Start.Cause)
		}
		if res, out, _ := run(ctx, "run-short", "/bin/echo", "beside"); res.Exit == nil || out != "beside\n" {
			t.Fatalf("run beside: exit %+v, out %q (%v)", res.Exit, out, res.Start.Cause)
		}
		stop()
		res := <-done
		if !res.Stopped || !res.Kill.Proven {
			t.Fatalf("interrupted run: stopped %v, kill %v", res.Stopped, res.Kill.Err())
		}
		e.expectForgotten(t, gen.InstanceRef, "run-long")
	})

	t.Run("refused", func(t *testing.T) {
		var pe *PrepareError
		if res, _, _ := run(ctx, "run-x"); res.Start.Kind != outcome.NotStarted {
			t.Errorf("no command: %v", res.Start.Kind)
		}
		if res := e.node.Run(ctx, RunRequest{InstanceRef: gen.InstanceRef, Name: "run-y", Generation: 9, Argv: []string{"/bin/true"},
			Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}); res.Start.Kind != outcome.NotStarted || !errors.As(res.Start.Cause, &pe) {
			t.Errorf("against a generation that never was: %v (%v)", res.Start.Kind, res.Start.Cause)
		}
		if res, _, _ := run(ctx, "Bad_Name", "/bin/true"); res.Start.Kind != outcome.NotStarted || !errors.Is(res.Start.Cause, layout.ErrBadCommandName) {
			t.Errorf("bad name: %v (%v)", res.Start.Kind, res.Start.Cause)
		}
	})
}

// expectForgotten fails t when the run left a launch file, a record or a
// socket behind, or is still listed.
func (e *env) expectForgotten(t *testing.T, inst InstanceRef, name string) {
	t.Helper()
	li, err := e.lay.Instance(inst.Namespace, inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := li.Command(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{li.PrivateDir(), li.ExitDir(), li.LogDir()} {
		ents, _ := os.ReadDir(dir)
		for _, ent := range ents {
			if strings.Contains(ent.Name(), "cmd."+name+".") {
				t.Errorf("run %s left %s/%s", name, dir, ent.Name())
			}
		}
	}
	refs, err := e.node.ListInstance(context.Background(), inst)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.Role == layout.RoleCommand && r.Command == p.CommandName() {
			t.Errorf("run %s still listed", name)
		}
	}
}

// firstWrite closes seen on its first write and discards everything.
type firstWrite struct {
	seen chan struct{}
	once sync.Once
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.seen) })
	return len(p), nil
}
