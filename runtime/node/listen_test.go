package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestListenAfterReboot: an asleep Instance whose run dir a reboot
// emptied (no stable socket, no run dir) is held anew: the agent binds
// a socket of its own, leads the stable socket to it, and the first
// connection wakes the Instance. Before, Listen failed for as long as
// nothing started ("no stable socket yet"), and nothing would, since
// only a connection starts an asleep Instance.
func TestListenAfterReboot(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst := InstanceRef{Namespace: "default", Name: "asleep"}
	li, err := e.node.layoutOf(inst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(li.RunDir()); !os.IsNotExist(err) {
		t.Fatalf("run dir %s before the test: %v, want none", li.RunDir(), err)
	}
	if err := e.node.Listen(ctx, inst); err != nil {
		t.Fatalf("listen with an empty run dir: %v", err)
	}
	target, err := os.Readlink(li.StableSocket())
	if err != nil || filepath.Join(li.RunDir(), target) != li.IdleSocket() {
		t.Fatalf("stable socket leads to %q (%v), want %s", target, err, li.IdleSocket())
	}
	c, err := net.Dial("unix", li.StableSocket())
	if err != nil {
		t.Fatalf("connect through the stable socket: %v", err)
	}
	defer c.Close()
	select {
	case ref := <-e.node.Events():
		if ref.InstanceRef != inst {
			t.Errorf("woke %v, want %v", ref.InstanceRef, inst)
		}
	case <-ctx.Done():
		t.Fatal("the connection woke nothing")
	}
	if err := e.node.Listen(ctx, inst); err != nil {
		t.Errorf("listen again while held: %v", err)
	}
}
