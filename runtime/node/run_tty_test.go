package node

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// ttyOutput is a TTY run's Stdout, read while the run writes it.
type ttyOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *ttyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *ttyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// TestRunTTY: a TTY run's command has a terminal of its own as its
// controlling terminal, in its sandbox's /dev/pts, of the size asked for;
// what is typed reaches it; a resize is signalled to it (SIGWINCH) and
// seen; its exit code comes back; it leaves no file behind.
func TestRunTTY(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gen := e.appRequest("tty", 1)
	e.retireAtEnd(t, gen.Ref)
	if res := e.node.Start(ctx, gen); res.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", res.Start.Kind, res.Start.Cause)
	}
	// Granted root runs as uid 0 in a user namespace of its own, beside
	// a supervisor (the trampoline's other path to exec).
	rootGrant := func(string) (identity.Grant, error) { return identity.Grant{User: "root", Root: true}, nil }
	root := e.appRequest("ttyroot", 1)
	root.User, root.Grant = "root", identity.Grant{User: "root", Root: true}
	e.retireAtEnd(t, root.Ref)
	if res := e.node.Start(ctx, root); res.Start.Kind != outcome.Running {
		t.Fatalf("start as root: %v (%v)", res.Start.Kind, res.Start.Cause)
	}
	tests := map[string]struct {
		asRoot bool
		script string
		stdin  string
		// resizeAfter: once the output holds it, the terminal is resized
		// to 50x132.
		resizeAfter string
		wantOut     string
		wantCode    int
	}{
		"a controlling terminal of the size asked for": {
			// /dev/tty opens only a process's controlling terminal; the
			// sandbox's devpts is the run's alone, so its first is 0.
			script:  `test -t 0 && test -t 1 && test -t 2 && : </dev/tty && tty && stty size; exit 3`,
			wantOut: "/dev/pts/0\r\n24 80\r\n", wantCode: 3,
		},
		"typed": {
			script: `read line; echo "got $line"`, stdin: "hello\n",
			wantOut: "hello\r\ngot hello\r\n", // the terminal echoes what is typed
		},
		"granted root, in its user namespace": {
			asRoot: true, script: `id -u; tty; stty size; : </dev/tty; exit 4`,
			wantOut: "0\r\n/dev/pts/0\r\n24 80\r\n", wantCode: 4,
		},
		"resized": {
			script:      `trap 'stty size; exit 7' WINCH; echo ready; while :; do sleep 0.05; done`,
			resizeAfter: "ready", wantOut: "ready\r\n50 132\r\n", wantCode: 7,
		},
	}
	names := map[string]string{"a controlling terminal of the size asked for": "tty-a", "typed": "tty-b", "resized": "tty-c",
		"granted root, in its user namespace": "tty-d"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out ttyOutput
			resize := make(chan terminal.Size)
			var stdin io.Reader
			if tc.stdin != "" {
				stdin = strings.NewReader(tc.stdin)
			}
			req := RunRequest{InstanceRef: gen.InstanceRef, Name: names[name], Generation: 1,
				Argv: []string{"/bin/sh", "-c", tc.script}, Stdin: stdin, Stdout: &out, Stderr: failWriter{t},
				TTY: true, Size: terminal.Size{Rows: 24, Cols: 80}, Resize: resize, Grace: time.Second}
			if tc.asRoot {
				req.InstanceRef, req.Grant = root.InstanceRef, rootGrant
			}
			done := make(chan RunResult)
			go func() { done <- e.node.Run(ctx, req) }()
			if tc.resizeAfter != "" {
				waitOutput(t, &out, tc.resizeAfter)
				resize <- terminal.Size{Rows: 50, Cols: 132}
			}
			res := <-done
			if !res.Kill.Proven || res.Stopped || res.Exit == nil {
				t.Fatalf("run: start %v (%v), stopped %v, kill %v, exit %+v; output %q",
					res.Start.Kind, res.Start.Cause, res.Stopped, res.Kill.Err(), res.Exit, out.String())
			}
			got := struct {
				Out  string
				Code int
			}{out.String(), res.Exit.Code}
			want := struct {
				Out  string
				Code int
			}{tc.wantOut, tc.wantCode}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			e.expectForgotten(t, req.InstanceRef, names[name])
		})
	}
}

// failWriter is a TTY run's Stderr, which nothing may write to.
type failWriter struct{ t *testing.T }

func (f failWriter) Write(p []byte) (int, error) {
	f.t.Errorf("a TTY run wrote %q to Stderr", p)
	return len(p), nil
}

func waitOutput(t *testing.T, out *ttyOutput, s string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(out.String(), s) {
			return
		}
	}
	t.Fatalf("no %q in the output within 10s: %q", s, out.String())
}
