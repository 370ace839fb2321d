package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// instanceLayout is where Instance name's files are on a's node.
func instanceLayout(t testing.TB, a *agentproc.Agent, name string) layout.Instance {
	t.Helper()
	li, err := layout.Layout{StateRoot: a.StateRoot, RunRoot: a.RunRoot, CgroupRoot: a.CgroupRoot}.Instance(testutil.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return li
}

// askApp sends GET path to the serving generation of Instance name
// through its app socket, as the node's proxy would.
func askApp(t *testing.T, a *agentproc.Agent, name, path string) (string, error) {
	t.Helper()
	n := kube.Instance(t, name).Status.ActiveGeneration
	sock, err := instanceLayout(t, a, name).AppSocket(int64(n))
	if err != nil {
		return "", err
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://app" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan()
	return sc.Text(), nil
}

// diskPressure is the node's Enrollment's DiskPressure condition, rendered.
func diskPressure(t *testing.T, node string) (v1.Enrollment, string) {
	t.Helper()
	var enr v1.Enrollment
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
		return enr, err.Error()
	}
	c := meta.FindStatusCondition(enr.Status.Conditions, v1.ConditionDiskPressure)
	if c == nil {
		return enr, "no DiskPressure condition"
	}
	return enr, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// droppedLines is unitlet_log_lines_dropped_total of Instance name for
// reason, as a's /metrics says (0 while it has no series).
func droppedLines(t *testing.T, a *agentproc.Agent, name, reason string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + a.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := fmt.Sprintf(`unitlet_log_lines_dropped_total{name=%q,namespace=%q,reason=%q} `, name, testutil.Namespace, reason)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// readLog is the content of Instance name's current log file.
func readLog(t *testing.T, a *agentproc.Agent, name string) string {
	t.Helper()
	b, err := os.ReadFile(instanceLayout(t, a, name).LogFile())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// checkLoggingWhileFull: with the disk full, the logging app answers
// (each request writes a line first, so a blocked output would hang it),
// the Enrollment says DiskPressure, its lines are counted as dropped and
// keep being, and what was written before is still there.
func checkLoggingWhileFull(t *testing.T, a *agentproc.Agent, name, before string) {
	t.Helper()
	testutil.Eventually(t, "the Enrollment says DiskPressure=True", 60*time.Second, pollEvery, func() (bool, string) {
		enr, said := diskPressure(t, a.Node)
		return meta.IsStatusConditionTrue(enr.Status.Conditions, v1.ConditionDiskPressure), said
	})
	testutil.Eventually(t, name+"'s lines counted as dropped", 30*time.Second, pollEvery, func() (bool, string) {
		n := droppedLines(t, a, name, "NoSpace")
		return n > 0, fmt.Sprintf("%v dropped", n)
	})
	tally.checked(3)
	first := droppedLines(t, a, name, "NoSpace")
	for i := range 5 {
		if got, err := askApp(t, a, name, fmt.Sprintf("/full-%d", i)); err != nil || !strings.HasPrefix(got, "gen ") {
			tally.broke(t, restart, "%s did not answer while the disk was full: %q, %v", name, got, err)
		}
	}
	time.Sleep(time.Second)
	if later := droppedLines(t, a, name, "NoSpace"); later <= first {
		tally.broke(t, lie, "%s's dropped lines stayed at %v while it wrote: its output is not read", name, later)
	}
	if now := readLog(t, a, name); !strings.HasPrefix(now, before) {
		tally.broke(t, lie, "%s's log lost lines written before the disk filled: %d bytes then, %d now", name, len(before), len(now))
	}
}

// checkLoggingAfterFree: once space is back, DiskPressure is False and
// the log goes on after what it held, with a marker of the lines lost.
func checkLoggingAfterFree(t *testing.T, a *agentproc.Agent, name, before string) {
	t.Helper()
	testutil.Eventually(t, "the Enrollment says DiskPressure=False", 60*time.Second, pollEvery, func() (bool, string) {
		enr, said := diskPressure(t, a.Node)
		return meta.IsStatusConditionFalse(enr.Status.Conditions, v1.ConditionDiskPressure), said
	})
	if got, err := askApp(t, a, name, "/after"); err != nil || !strings.HasPrefix(got, "gen ") {
		t.Errorf("%s after the disk was freed: %q, %v", name, got, err)
	}
	testutil.Eventually(t, name+"'s log written again", 30*time.Second, pollEvery, func() (bool, string) {
		now := readLog(t, a, name)
		rest, ok := strings.CutPrefix(now, before)
		if !ok {
			return false, fmt.Sprintf("the log no longer starts with the %d bytes written before the disk filled", len(before))
		}
		_, after, marked := strings.Cut(rest, "lines dropped: NoSpace]\n")
		return marked && strings.Contains(after, "request /after"), fmt.Sprintf("written since the disk filled: %.400q", rest)
	})
	tally.checked(2)
}
