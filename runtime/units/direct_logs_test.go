package units

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/outcome"
)

// logSocket is a stand-in for the agent's log listener: it hands each
// line it reads to lines.
func logSocket(t *testing.T, path string, lines chan<- string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					select {
					case lines <- sc.Text():
					default:
					}
				}
			}()
		}
	}()
	return l
}

func nextLine(t *testing.T, lines <-chan string, within time.Duration) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(within):
		t.Fatal("no output line arrived")
		return ""
	}
}

// TestDirectOutputSurvivesAgentRestart: an app that writes all the time
// keeps running while no agent listens on its log socket (the shim holds
// the connection, not the app), and its output arrives again once an
// agent listens anew. An app wired to the socket itself would die of
// SIGPIPE at its first write after the agent went.
func TestDirectOutputSurvivesAgentRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newDEnv(t)
	b := env.backend(t, 10*time.Second)
	p := makeProc(t, env.lay, "chatty", 1, "/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.02; done")
	t.Cleanup(func() { b.Prove(context.Background(), p) })

	lines := make(chan string, 1024)
	l := logSocket(t, p.LogSocket(), lines)
	if got := b.Start(ctx, Spec{Slot: p, Grace: time.Second}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	if first := nextLine(t, lines, 5*time.Second); !strings.HasPrefix(first, "tick ") {
		t.Fatalf("first line %q", first)
	}

	// The agent dies: its listener and every accepted connection go.
	l.Close()
	_ = os.Remove(p.LogSocket())
	time.Sleep(500 * time.Millisecond) // ~25 writes with nobody listening
	st, err := b.Observe(ctx, p)
	if err != nil || st.Gone() || syscall.Kill(st.MainPID, 0) != nil {
		t.Fatalf("the app did not survive the agent's absence: %+v (exit %+v) %v", st, st.Exit, err)
	}

	// A new agent listens again: output flows again, from the same app.
	for len(lines) > 0 {
		<-lines
	}
	l2 := logSocket(t, p.LogSocket(), lines)
	defer l2.Close()
	if again := nextLine(t, lines, 5*time.Second); !strings.HasPrefix(again, "tick ") {
		t.Fatalf("line after the restart %q", again)
	}
	if st2, err := b.Observe(ctx, p); err != nil || st2.MainPID != st.MainPID {
		t.Errorf("main pid %d after, %d before (%v)", st2.MainPID, st.MainPID, err)
	}
}
