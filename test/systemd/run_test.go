package systemd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// TestRunOnTerminal: a TTY run as a transient systemd service (whose main
// process systemd made a session leader already) gets its terminal from
// its sandbox as its controlling terminal, of the size asked for; what is
// typed reaches it, a resize is signalled to it and seen, and its exit
// code comes back.
func TestRunOnTerminal(t *testing.T) {
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", testNode)
	inst.Name, inst.Spec.Host = "termed", "termed.example.com"
	create(t, inst)
	kube.WaitServing(t, inst.Name, 1)

	var out testutil.SyncBuffer
	resize := make(chan terminal.Size)
	typed, typing := io.Pipe()
	defer typing.Close()
	done := make(chan node.RunResult, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		done <- rt.Run(ctx, node.RunRequest{
			InstanceRef: node.InstanceRef{Namespace: inst.Namespace, Name: inst.Name}, Name: "run-tty", Generation: 1,
			Argv: []string{"/bin/sh", "-c", `trap 'stty size; exit 6' WINCH; : </dev/tty; tty; stty size; read l; echo "got $l"; ` +
				`while :; do sleep 0.1; done`},
			Stdin: typed, Stdout: &out, Stderr: &out, TTY: true, Size: terminal.Size{Rows: 24, Cols: 80}, Resize: resize, Grace: time.Second,
		})
	}()
	// Typed once it said its size: the terminal echoes at once what is
	// typed, whatever the command is doing.
	testutil.Eventually(t, "the command on its terminal", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(out.String(), "24 80\r\n"), out.String()
	})
	if _, err := io.WriteString(typing, "hello\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the command reads what was typed", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(out.String(), "got hello"), out.String()
	})
	resize <- terminal.Size{Rows: 50, Cols: 132}
	res := <-done
	if !res.Kill.Proven || res.Exit == nil {
		t.Fatalf("run: start %v (%v), stopped %v, kill %v, exit %+v; terminal %q", res.Start.Kind, res.Start.Cause, res.Stopped, res.Kill.Err(), res.Exit, out.String())
	}
	want := "/dev/pts/0\r\n24 80\r\nhello\r\ngot hello\r\n50 132\r\n"
	if got := out.String(); got != want || res.Exit.Code != 6 || res.Start.Kind == outcome.NotStarted {
		t.Errorf("terminal %q, exit %d; want %q and exit 6", got, res.Exit.Code, want)
	}
}
