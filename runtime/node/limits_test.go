package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/units"
)

// TestParentLimits: a raise reaches the instance parent's files, and a
// restore brings back the floor the start asked for.
func TestParentLimits(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("limits", 1)
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	li, _ := e.lay.Instance(r.Namespace, r.Name)
	m, err := e.direct.Manager(li)
	if err != nil {
		t.Fatal(err)
	}
	read := func() int64 {
		l, err := m.Limits("")
		if err != nil {
			t.Fatal(err)
		}
		return l.MemoryBytes
	}
	if diff := cmp.Diff(r.Parent.MemoryBytes, read()); diff != "" {
		t.Errorf("floor after start (-want,+got):\n%s", diff)
	}
	if err := e.node.RaiseParent(ctx, r.InstanceRef, cgroups.Tier{MemoryBytes: 1 << 30, Pids: 128}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(int64(1<<30), read()); diff != "" {
		t.Errorf("after raise (-want,+got):\n%s", diff)
	}
	// Restored by a Node that started nothing (an agent just restarted):
	// the floor comes from the caller, not from the Node's memory.
	after, _ := e.newNode(t)
	defer after.Close()
	if err := after.RestoreParent(ctx, r.InstanceRef, r.Parent); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Parent.MemoryBytes, read()); diff != "" {
		t.Errorf("after restore (-want,+got):\n%s", diff)
	}
}

// TestRunKeepsParentLimits: a run (kubectl unitlet run) beside the
// serving generation joins the Instance's parent under its tier: the
// parent's memory, pids and cpu limits are the tier before and after.
func TestRunKeepsParentLimits(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("runtier", 1)
	r.Parent.CPUMillis = 500
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	li, _ := e.lay.Instance(r.Namespace, r.Name)
	m, err := e.direct.Manager(li)
	if err != nil {
		t.Fatal(err)
	}
	want := cgroups.Limits{MemoryBytes: r.Parent.MemoryBytes, Pids: r.Parent.Pids, CPUQuotaMicros: 50000, CPUPeriod: 100000, CPUWeight: 512}
	res := e.node.Run(ctx, RunRequest{InstanceRef: r.InstanceRef, Name: "once", Generation: 1, Argv: []string{"/bin/true"},
		Stdout: io.Discard, Stderr: io.Discard, Grace: time.Second})
	if res.Exit == nil || res.Exit.Code != 0 || !res.Kill.Proven {
		t.Fatalf("run: start %v (%v), exit %+v, kill %v", res.Start.Kind, res.Start.Cause, res.Exit, res.Kill.Err())
	}
	got, err := m.Limits("")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parent after the run (-want,+got):\n%s", diff)
	}
}

// A tier's pids are the app's own: at the validated minimum, 8, the app
// runs 8 tasks of its own, the shim and the trampoline counted apart
// (units.PlatformTasks is what the controllers add to every tier).
func TestAppRunsItsWholePidsBudget(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("pids", 1)
	r.Command, r.Args = []string{"/bin/sh"}, []string{"-c", "for i in 1 2 3 4 5 6 7; do sleep 1000 & done; wait"}
	r.Tier = cgroups.Tier{MemoryBytes: 64 << 20, Pids: 8 + units.PlatformTasks}
	e.retireAtEnd(t, r.Ref)
	if got := e.node.Start(ctx, r); got.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Start.Kind, got.Start.Cause)
	}
	p, err := e.node.procOf(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	child, err := p.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.direct.Manager(p.Instance())
	if err != nil {
		t.Fatal(err)
	}
	appTasks := func() int {
		pids, _ := m.Pids(child)
		n := 0
		for _, pid := range pids {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if c := strings.TrimSpace(string(comm)); c == "sh" || c == "sleep" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for appTasks() < 8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := appTasks(); got != 8 {
		t.Errorf("the app runs %d tasks under pids: 8, want all 8", got)
	}
}
