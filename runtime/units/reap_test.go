package units

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Children waited for hold no OS thread and no goroutine each (the agent
// waits for every shim it started), and each one's end is read back right.
func TestReapChildHoldsNoThread(t *testing.T) {
	const n = 100
	threads0, goroutines0 := threadCount(t), runtime.NumGoroutine()
	type reaped struct {
		ws  syscall.WaitStatus
		err error
	}
	var cmds []*exec.Cmd
	results := make(chan reaped, n)
	for i := range n {
		cmd := exec.Command("/bin/sh", "-c", "exec sleep 100")
		if i == 0 {
			cmd = exec.Command("/bin/sh", "-c", "exit 7")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		onReaped(cmd.Process.Pid, func(ws syscall.WaitStatus, err error) { results <- reaped{ws, err} })
	}
	first := <-results // the one that exits on its own
	if first.err != nil || !first.ws.Exited() || first.ws.ExitStatus() != 7 {
		t.Errorf("reaped %s (err %v), want exit status 7", describeWait(first.ws), first.err)
	}
	time.Sleep(200 * time.Millisecond) // every waiter parked
	if grown := threadCount(t) - threads0; grown > n/4 {
		t.Errorf("%d more threads while %d children are waited for, want (about) none", grown, n-1)
	}
	if grown := runtime.NumGoroutine() - goroutines0; grown > n/4 {
		t.Errorf("%d more goroutines while %d children are waited for, want (about) none", grown, n-1)
	}
	for _, cmd := range cmds[1:] {
		_ = cmd.Process.Kill()
	}
	for range n - 1 {
		select {
		case r := <-results:
			if r.err != nil || !r.ws.Signaled() || r.ws.Signal() != syscall.SIGKILL {
				t.Errorf("reaped %s (err %v), want signal: killed", describeWait(r.ws), r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a killed child was not reaped")
		}
	}
}

func threadCount(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}
