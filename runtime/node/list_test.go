package node

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/prepare"
)

// TestListAdoptsAfterRestart: a new Node (an agent restart) lists the
// running slot, does not start it again, and reports its end on Events.
func TestListAdoptsAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.appRequest("adopt", 1)
	e.retireAtEnd(t, r.Ref)
	first := e.node.Start(ctx, r)
	if first.Start.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", first.Start.Kind, first.Start.Cause)
	}
	waitReady(ctx, t, e.node, r.Ref)

	// The first Node goes as a dead agent's would: its listeners with it.
	if err := e.node.Close(); err != nil {
		t.Fatal(err)
	}
	n2, _ := e.newNode(t)
	e.node = n2 // it retires the slot at the end
	refs, err := n2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ref{r.Ref}, refs); diff != "" {
		t.Errorf("List (-want,+got):\n%s", diff)
	}
	// The adopted generation's control socket answers again: the one
	// its env names died with the first Node. Not serving: 409.
	li, _ := e.lay.Instance(r.Namespace, r.Name)
	env, err := instancefs.ReadEnv(li.PrivateDir(), layout.EnvFileName)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := li.AppSocket(r.Generation)
	if code := putSchedules(ctx, t, layout.ControlSocket(app), env[prepare.EnvAdminToken]); code != http.StatusConflict {
		t.Errorf("control socket after the restart: %d, want 409", code)
	}
	again := n2.Start(ctx, r)
	if again.Start.Kind != outcome.Running || again.Start.MainPID != first.Start.MainPID || len(again.Steps) != 0 {
		t.Errorf("start after restart: %v pid %d steps %v, want the first run (pid %d) untouched",
			again.Start.Kind, again.Start.MainPID, again.Steps, first.Start.MainPID)
	}
	if err := unix.Kill(first.Start.MainPID, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-n2.Events():
		if diff := cmp.Diff(r.Ref, ev); diff != "" {
			t.Errorf("event (-want,+got):\n%s", diff)
		}
	case <-ctx.Done():
		t.Fatal("no event from the adopted slot's end")
	}
}
