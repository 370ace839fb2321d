package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/cluster"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// pluginLogsAndRun: `kubectl unitlet` on this machine, outside the node
// VM's network, as on a laptop: every request goes to the API server,
// which hands it to the relay in the VM (routeRelay), which reaches the
// DaemonSet's agent over mutual TLS. A user bound to view reads logs and
// is refused runs; one bound to edit runs, with stdin, and on a terminal
// that follows its resize. The users' tokens never leave
// this machine and the API server.
func pluginLogsAndRun(t *testing.T) {
	ctx := context.Background()
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", cluster.NodeName)
	inst.Name, inst.Spec.Host = "ticker", "ticker.example.com"
	inst.Spec.Template.Args = []string{"-c", testutil.TickerApp}
	if err := k8s.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=180s", "inst/ticker")
	viewToken, editToken := testutil.PluginUsers(t, kubectl, testutil.Namespace, testutil.BuiltinRoles, "viewer", "editor")
	viewer, editor := pluginUser(t, "viewer", viewToken), pluginUser(t, "editor", editToken)

	eventually(t, "the viewer reads the app's ticks", time.Minute, func() (bool, string) {
		p := testutil.Plugin(t, viewer, "logs", "ticker")
		return p.Code() == 0 && strings.Contains(p.Stdout(), "tick g1 3\n"), p.Stderr() + testutil.Tail(p.Stdout(), 12)
	})
	if p := testutil.Plugin(t, c.Kubeconfig, "logs", "ticker", "-n", testutil.Namespace, "--tail", "2"); p.Code() != 0 || strings.Count(p.Stdout(), "\n") != 2 {
		t.Errorf("the administrator's logs --tail 2: exit %d, %q, stderr %q", p.Code(), p.Stdout(), p.Stderr())
	}
	p := testutil.Plugin(t, editor, "run", "ticker", "--", "/bin/sh", "-c", `echo "uid $(id -u) generation $UNITLET_GENERATION"; echo oops >&2; exit 7`)
	if !strings.Contains(p.Stdout(), "generation 1\n") || strings.Contains(p.Stdout(), "uid 0 ") || p.Stderr() != "oops\n" || p.Code() != 7 {
		t.Errorf("the editor's run: exit %d, stdout %q, stderr %q; want the app's own (non-root) uid, generation 1, oops apart, exit 7",
			p.Code(), p.Stdout(), p.Stderr())
	}
	run, stdin := testutil.StartPluginPiped(t, editor, "exec", "-i", "ticker", "--", "/bin/sh", "-c", "wc -l")
	_, _ = stdin.Write([]byte("a\nb\n"))
	stdin.Close()
	if code := run.Wait(); code != 0 || strings.TrimSpace(run.Stdout()) != "2" {
		t.Errorf("the editor's exec -i: exit %d, %q (stderr %q), want 2 lines counted", code, run.Stdout(), run.Stderr())
	}
	// -it: a terminal of the command's own (made in its sandbox by the
	// unit's trampoline), of the user's size, resized with the user's.
	tty, term := testutil.StartPluginOnTerminal(t, editor, 80, 24, "run", "-it", "ticker", "--", "/bin/sh", "-c",
		`trap 'stty size; exit 6' WINCH; tty; stty size; echo ready; while :; do sleep 0.1; done`)
	eventually(t, "the command on its terminal", time.Minute, func() (bool, string) {
		return strings.Contains(term.Output(), "ready"), term.Output()
	})
	if out := term.Output(); !strings.Contains(out, "/dev/pts/0\r\n24 80\r\n") {
		t.Errorf("run -it: the command's terminal and size %q, want /dev/pts/0 of 24 rows, 80 columns", out)
	}
	term.Resize(t, 132, 50)
	if code := tty.Wait(); code != 6 || !strings.Contains(term.Output(), "50 132\r\n") {
		t.Errorf("run -it resized: exit %d (want 6), terminal %q (want the new size)", code, term.Output())
	}
	if p := testutil.Plugin(t, viewer, "run", "ticker", "--", "/bin/true"); p.Code() == 0 || !strings.Contains(p.Stderr(), "403") {
		t.Errorf("the viewer's run: exit %d, stderr %q; want a 403", p.Code(), p.Stderr())
	}
	followAcrossSwapAndRestart(t, viewer)
	kube.DeleteAndWait(t, "ticker", 3*time.Minute)
	leftOnNode(t, "ticker")
}

// followAcrossSwapAndRestart: one `logs -f` goes on across a swap (its
// lines of generation 2 follow those of 1) and across the agent pod's
// restart (the relay reconnects it to the next agent), printing no line
// twice.
func followAcrossSwapAndRestart(t *testing.T, user string) {
	follow := testutil.StartPlugin(t, user, "logs", "ticker", "-f", "--prefix")
	eventually(t, "the follow sees generation 1", time.Minute, func() (bool, string) {
		return strings.Contains(follow.Stdout(), "tick g1"), follow.Stderr() + testutil.Tail(follow.Stdout(), 12)
	})
	kube.UpdateInstance(t, "ticker", time.Minute, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	eventually(t, "the same follow sees generation 2 after the swap", 2*time.Minute, func() (bool, string) {
		return strings.Contains(follow.Stdout(), "tick g2 3\n"), follow.Stderr() + testutil.Tail(follow.Stdout(), 12)
	})
	before := strings.Count(follow.Stdout(), "tick g2")
	old := agentPod(t).Name
	kubectl(t, "delete", "pod", "-n", "unitlet-system", old, "--wait=false")
	eventually(t, "a new agent pod Ready", 4*time.Minute, func() (bool, string) {
		state := newAgentReady(old)
		return state == "", state
	})
	eventually(t, "the follow goes on with the next agent", 2*time.Minute, func() (bool, string) {
		return strings.Count(follow.Stdout(), "tick g2") > before+10, follow.Stderr() + testutil.Tail(follow.Stdout(), 6)
	})
	seen := map[string]bool{}
	for _, line := range strings.Split(follow.Stdout(), "\n") {
		if seen[line] && line != "" {
			t.Errorf("the follow printed %q twice", line)
		}
		seen[line] = true
	}
	_ = follow.Cmd.Process.Kill()
	follow.Wait()
}

// pluginUser writes a kubeconfig for user against the API server on this
// machine's loopback and returns its path.
func pluginUser(t *testing.T, user, token string) string {
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(path, testutil.Kubeconfig(t, c.Env.Config.Host, c.Env.Config.CAData, testutil.Namespace, user, token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
