package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestPluginLogsAndRun: two real users of the API server, one granted
// instances/log and instances/run, one not. The granted one reads the
// app's output, follows it across a swap, runs commands in the active
// generation's environment (output apart, exit code back, the app's own
// uid, a cgroup child of its own) and interrupts one, which the agent
// stops and proves gone; the other gets 403 for both. A run that
// outlives its agent is stopped by the next one.
func TestPluginLogsAndRun(t *testing.T) {
	a := startAgent(t, "e2e-plugin", func(a *agent) { a.Metrics = true })
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name = "ticker"
	inst.Spec.Template.Args = []string{"-c", testutil.TickerApp}
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	waitServing(t, inst.Name, 1)
	// bob may view (logs), alice may edit (logs and runs); no controller
	// manager aggregates roles here, so they hold unitlet's own.
	bobToken, aliceToken := testutil.PluginUsers(t, kubectl, "default", testutil.UnitletRoles, "bob", "alice")
	alice, bob := userConfig(t, "alice", aliceToken), userConfig(t, "bob", bobToken)
	const aliceName = "system:serviceaccount:default:alice"

	testutil.Eventually(t, "alice reads the app's ticks", 30*time.Second, pollEvery, func() (bool, string) {
		p := testutil.Plugin(t, alice, "logs", inst.Name)
		return p.Code() == 0 && strings.Contains(p.Stdout(), "tick g1 3\n"), p.Stderr() + testutil.Tail(p.Stdout(), 12)
	})

	// The suite's administrator authenticates with a client certificate:
	// the API server verifies it, the relay believes the API server.
	if p := testutil.Plugin(t, kubeconfig, "logs", inst.Name); p.Code() != 0 || !strings.Contains(p.Stdout(), "tick g1 3\n") {
		t.Errorf("the administrator's logs: exit %d, stderr %q", p.Code(), p.Stderr())
	}
	if p := testutil.Plugin(t, bob, "logs", inst.Name); p.Code() != 0 || !strings.Contains(p.Stdout(), "tick g1 3\n") {
		t.Errorf("bob (view) reads logs: exit %d, stderr %q", p.Code(), p.Stderr())
	}
	follow := testutil.StartPlugin(t, alice, "logs", inst.Name, "-f", "--prefix")
	testutil.Eventually(t, "the follow sees generation 1", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(follow.Stdout(), "[g1] tick g1"), follow.Stderr() + testutil.Tail(follow.Stdout(), 12)
	})
	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	waitServing(t, inst.Name, 2)
	testutil.Eventually(t, "the same follow sees generation 2 after the swap", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(follow.Stdout(), "[g2] tick g2 3\n"), follow.Stderr() + testutil.Tail(follow.Stdout(), 12)
	})
	if s := follow.Stdout(); strings.Index(s, "tick g2") < strings.LastIndex(s, "tick g1") {
		t.Errorf("generation 1's lines after generation 2's:\n%s", testutil.Tail(s, 12))
	}

	run := testutil.Plugin(t, alice, "run", inst.Name, "--", "/bin/sh", "-c",
		`echo "out $UNITLET_GENERATION $(id -u) $UNITLET_ROLE"; echo "err $UNITLET_NAME" >&2; cat /proc/self/cgroup; exit 3`)
	if run.Code() != 3 {
		t.Fatalf("run exit code %d, want 3; stderr:\n%s", run.Code(), run.Stderr())
	}
	uid := appUID(t, a, inst.Name)
	if want := fmt.Sprintf("out 2 %d cmd\n", uid); !strings.HasPrefix(run.Stdout(), want) || uid == 0 {
		t.Errorf("run stdout %q, want it to start %q (generation 2's env but UNITLET_ROLE, the app's own uid)", run.Stdout(), want)
	}
	if !strings.Contains(run.Stdout(), "/role-cmd-run-") {
		t.Errorf("run not in a cgroup child of its own:\n%s", run.Stdout())
	}
	if strings.Contains(run.Stdout(), "err ") || !strings.Contains(run.Stderr(), "err ticker\n") {
		t.Errorf("stderr not apart: stdout %q, stderr %q", run.Stdout(), run.Stderr())
	}
	waitEvent(t, inst.Name, "RunFailed", aliceName, "exit code 3")

	// stdin: none unless asked (an empty one, no hang); with -i, streamed
	// while the command runs, as a console needs.
	if p := testutil.Plugin(t, alice, "run", inst.Name, "--", "/bin/cat"); p.Code() != 0 || p.Stdout() != "" {
		t.Errorf("a run without -i: exit %d, stdout %q, stderr %q", p.Code(), p.Stdout(), p.Stderr())
	}
	console, in := testutil.StartPluginPiped(t, alice, "run", "-i", inst.Name, "--", "/bin/sh", "-c", `while read l; do echo "got $l"; done; echo bye`)
	for _, line := range []string{"one", "two"} {
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the console answers "+line+" before its stdin ends", 20*time.Second, pollEvery, func() (bool, string) {
			return strings.Contains(console.Stdout(), "got "+line+"\n"), console.Stdout() + console.Stderr()
		})
	}
	in.Close()
	if code := console.Wait(); code != 0 || console.Stdout() != "got one\ngot two\nbye\n" {
		t.Errorf("the console: exit %d, stdout %q, stderr %q", code, console.Stdout(), console.Stderr())
	}

	// -it: the command's own terminal (the sandbox's first), of the
	// user's size, resized with the user's, its exit code back.
	tty, term := testutil.StartPluginOnTerminal(t, alice, 80, 24, "run", "-it", inst.Name, "--", "/bin/sh", "-c",
		`trap 'stty size; exit 6' WINCH; tty; stty size; echo ready; while :; do sleep 0.1; done`)
	testutil.Eventually(t, "the command on its terminal", 30*time.Second, pollEvery, func() (bool, string) {
		return strings.Contains(term.Output(), "ready"), term.Output()
	})
	if out := term.Output(); !strings.Contains(out, "/dev/pts/0\r\n24 80\r\n") {
		t.Errorf("run -it: the command's terminal and size %q, want /dev/pts/0 of 24 rows, 80 columns", out)
	}
	term.Resize(t, 132, 50)
	if code := tty.Wait(); code != 6 || !strings.Contains(term.Output(), "50 132\r\n") {
		t.Errorf("run -it resized: exit %d (want 6), terminal %q (want the new size)", code, term.Output())
	}

	// Two at once, each its own: the second starts and ends while the
	// first still runs, each with its own exit code.
	marker := "unitlet-plugin-" + runID
	first := testutil.StartPlugin(t, alice, "run", inst.Name, "--", "/bin/sh", "-c", "sleep 5; echo first; : "+marker+"-first")
	testutil.Eventually(t, "the first run's command runs", 20*time.Second, pollEvery, func() (bool, string) {
		return len(pidsOf(marker+"-first")) > 0, first.Stderr()
	})
	second := testutil.Plugin(t, alice, "run", inst.Name, "--", "/bin/sh", "-c", "exit 5")
	select {
	case <-first.Done():
		t.Errorf("the second run ended only after the first: exit %d, stdout %q", first.Code(), first.Stdout())
	default:
	}
	if second.Code() != 5 || first.Wait() != 0 || first.Stdout() != "first\n" {
		t.Errorf("concurrent runs: second %d (%s), first %d %q (%s)", second.Code(), second.Stderr(), first.Code(), first.Stdout(), first.Stderr())
	}

	// Interrupted: the agent stops the command and proves it gone.
	sleeper := testutil.StartPlugin(t, alice, "run", inst.Name, "--", "/bin/sh", "-c", "sleep 300; : "+marker)
	testutil.Eventually(t, "the interrupted run's command runs", 20*time.Second, pollEvery, func() (bool, string) {
		return len(pidsOf(marker)) > 0, sleeper.Stderr()
	})
	_ = sleeper.Cmd.Process.Signal(syscall.SIGINT)
	if code := sleeper.Wait(); code != 130 {
		t.Errorf("interrupted plugin exit code %d, want 130; stderr:\n%s", code, sleeper.Stderr())
	}
	testutil.Eventually(t, "nothing of the interrupted run left", 30*time.Second, pollEvery, func() (bool, string) {
		return len(pidsOf(marker)) == 0 && len(runCgroups(t, a, inst.Name)) == 0, fmt.Sprint(pidsOf(marker), runCgroups(t, a, inst.Name))
	})
	waitEvent(t, inst.Name, "RunInterrupted", aliceName, "stopped and proven gone")
	for _, result := range []string{"failed", "succeeded", "interrupted"} {
		if got := agentSample(t, a.MetricsAddr, "unitlet_run_duration_seconds_count", map[string]string{"result": result}); got == "" || got == "0" {
			t.Errorf("agent /metrics: runs counted as %s: %q", result, got)
		}
	}

	for _, args := range [][]string{{"run", inst.Name, "--", "/bin/true"}, {"exec", inst.Name, "--", "/bin/true"}} {
		p := testutil.Plugin(t, bob, args...)
		if p.Code() == 0 || !strings.Contains(p.Stderr(), "403") || !strings.Contains(p.Stderr(), "cannot") {
			t.Errorf("bob (view) %v: exit %d, stderr %q; want a 403 saying what he cannot do", args, p.Code(), p.Stderr())
		}
	}

	// A run that outlives its agent: the next agent stops it, proven.
	orphan := testutil.StartPlugin(t, alice, "run", inst.Name, "--", "/bin/sh", "-c", "sleep 301; : "+marker)
	testutil.Eventually(t, "the run the agent will not see end runs", 20*time.Second, pollEvery, func() (bool, string) {
		return len(pidsOf(marker)) > 0, orphan.Stderr()
	})
	before := strings.Count(follow.Stdout(), "[g2] tick g2")
	a.Stop(syscall.SIGKILL)
	a.Launch(t)
	testutil.Eventually(t, "the next agent stops the run it found", 60*time.Second, pollEvery, func() (bool, string) {
		return len(pidsOf(marker)) == 0 && len(runCgroups(t, a, inst.Name)) == 0, fmt.Sprint(pidsOf(marker), runCgroups(t, a, inst.Name))
	})
	waitEvent(t, inst.Name, "RunAbandoned", "", "stopped and proven gone")
	testutil.Eventually(t, "the follow goes on with the next agent", 60*time.Second, pollEvery, func() (bool, string) {
		return strings.Count(follow.Stdout(), "[g2] tick g2") > before+20, follow.Stderr()
	})
	seen := map[string]bool{}
	for _, line := range strings.Split(follow.Stdout(), "\n") {
		if seen[line] && line != "" {
			t.Errorf("the follow printed %q twice", line)
		}
		seen[line] = true
	}
	testutil.Eventually(t, "logs still read after the restart, old lines and new", 30*time.Second, pollEvery, func() (bool, string) {
		p := testutil.Plugin(t, alice, "logs", inst.Name, "--generation", "2")
		s := p.Stdout()
		return p.Code() == 0 && strings.Contains(s, "tick g2 0\n") && strings.Count(s, "\n") > strings.Count(follow.Stdout(), "[g2]"), p.Stderr() + testutil.Tail(s, 12)
	})
}

// userConfig writes a kubeconfig for user with token and returns its path.
func userConfig(t *testing.T, user, token string) string {
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(path, testutil.Kubeconfig(t, env.Config.Host, env.Config.CAData, "default", user, token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// appUID is the uid the Instance's app runs as (its data dir's owner).
func appUID(t *testing.T, a *agent, name string) int {
	t.Helper()
	li, err := a.Layout().Instance("default", name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(li.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Sys().(*syscall.Stat_t).Uid)
}

// runCgroups are the run children under the Instance's cgroup (in the
// pids hierarchy, as processesUnder reads it).
func runCgroups(t *testing.T, a *agent, name string) []string {
	t.Helper()
	li, err := a.Layout().Instance("default", name)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup/pids/" + li.Cgroup())
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "role-cmd-") {
			runs = append(runs, e.Name())
		}
	}
	return runs
}

// pidsOf are the processes whose command line holds marker.
func pidsOf(marker string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) && !strings.Contains(string(b), "kubectl-unitlet") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitEvent waits for an Event on the Instance with reason whose note
// holds every part.
func waitEvent(t *testing.T, name, reason string, parts ...string) {
	t.Helper()
	testutil.Eventually(t, "event "+reason, 30*time.Second, pollEvery, func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace("default")); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != name || e.Reason != reason {
				continue
			}
			seen = append(seen, e.Note)
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e.Note, p)
			}
			if ok {
				return true, ""
			}
		}
		return false, strings.Join(seen, "\n")
	})
}

// TestPluginFollowsRotation: with a log file rotated every ~45 lines, a
// follow reads every line the app printed, in order, none twice, across
// the rotations, and a plain read returns what the kept files hold.
func TestPluginFollowsRotation(t *testing.T) {
	a := startAgent(t, "e2e-rotate", func(a *agent) {
		a.Args = append(a.Args, "--instance-log-max-size=2Ki", "--instance-log-keep=2")
	})
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name = "rotating"
	inst.Spec.Template.Args = []string{"-c", testutil.TickerApp}
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	waitServing(t, inst.Name, 1)
	follow := testutil.StartPlugin(t, kubeconfig, "logs", "-f", inst.Name)
	const lines = 150 // three rotations and more
	var first int
	testutil.Eventually(t, "the follow reads across rotations", 60*time.Second, pollEvery, func() (bool, string) {
		s := follow.Stdout()
		if _, err := fmt.Sscanf(s, "tick g1 %d\n", &first); err != nil {
			return false, follow.Stderr() + testutil.Tail(s, 3)
		}
		return strings.Contains(s, fmt.Sprintf("tick g1 %d\n", first+lines)), follow.Stderr() + testutil.Tail(s, 3)
	})
	var want strings.Builder
	for n := first; n <= first+lines; n++ {
		fmt.Fprintf(&want, "tick g1 %d\n", n)
	}
	if got := follow.Stdout(); !strings.HasPrefix(got, want.String()) {
		t.Errorf("the follow lost or repeated lines across rotations:\n%s", testutil.Tail(got, 20))
	}
	li, err := a.Layout().Instance("default", inst.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(li.LogFile() + ".2"); err != nil {
		t.Errorf("the log file was not rotated twice: %v", err)
	}
}
