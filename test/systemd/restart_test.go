package systemd

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// lineNumbers are the numbers of the "line <n>" records in a log file, in
// file order.
func lineNumbers(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []int
	for _, m := range regexp.MustCompile(`(?m) line (\d+)$`).FindAllSubmatch(b, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		out = append(out, n)
	}
	return out
}

// TestAgentRestartKeepsAppAndItsOutput: the agent goes away (its Node and
// backend closed, as on SIGTERM) while a chatty app runs under systemd,
// and a new one comes back over the same roots. The app keeps running,
// never dies of SIGPIPE, and every line it wrote, also those written
// while no agent read, reaches the log file in order: it writes into its
// log FIFO, which it holds open itself.
func TestAgentRestartKeepsAppAndItsOutput(t *testing.T) {
	ctx := context.Background()
	log := stderrLogger()
	first, err := newRuntime(log)
	if err != nil {
		t.Fatal(err)
	}
	const name = "chatty"
	li := instanceLayout(t, name)
	ref := node.GenerationRef(li.Namespace(), name, 1)
	res := first.Start(ctx, node.StartRequest{
		Ref: ref, Host: "chatty.example.com",
		Command: []string{"/bin/sh", "-c", "i=0; while :; do echo line $i; i=$((i+1)); sleep 0.02; done"},
		Grace:   time.Second,
	})
	if res.Start.Kind != outcome.Running {
		first.Close()
		t.Fatalf("start: %v (%v)", res.Start.Kind, res.Start.Cause)
	}
	second := first
	t.Cleanup(func() {
		if k := second.Retire(ctx, ref, time.Second); !k.Proven {
			t.Errorf("retire: %v", k.Err())
		}
		if err := second.Remove(ctx, node.InstanceRef{Namespace: li.Namespace(), Name: name}); err != nil {
			t.Errorf("remove: %v", err)
		}
		second.Close()
	})
	seen := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got := lineNumbers(t, li.LogFile())
			return len(got) > 0 && got[len(got)-1] >= n, fmt.Sprintf("%d lines", len(got))
		}
	}
	testutil.Eventually(t, "the app's first lines", 10*time.Second, pollEvery, seen(5))

	if err := first.Close(); err != nil {
		t.Fatalf("close the first agent's runtime: %v", err)
	}
	// About 25 lines while nothing reads them.
	time.Sleep(500 * time.Millisecond)
	before := lineNumbers(t, li.LogFile())

	if second, err = newRuntime(log); err != nil {
		t.Fatal(err)
	}
	if _, err := second.List(ctx); err != nil {
		t.Fatal(err)
	}
	last := before[len(before)-1]
	testutil.Eventually(t, "the app's lines after the restart", 10*time.Second, pollEvery, seen(last+40))

	got := lineNumbers(t, li.LogFile())
	for i, n := range got {
		if n != i {
			t.Fatalf("log file lines jump from %d to %d at record %d: output was lost", i-1, n, i)
		}
	}
	st, err := second.Observe(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveState != "active" || st.MainPID != res.Start.MainPID {
		t.Errorf("after the restart: %s, main pid %d; want active with the first run's pid %d",
			st.ActiveState, st.MainPID, res.Start.MainPID)
	}
}
