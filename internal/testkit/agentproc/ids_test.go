package agentproc

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/unitlet/unitlet/runtime/identity"
)

// Two agents of one process get ranges apart from each other and from
// the default range (`make run`'s agent's).
func TestClaimIDs(t *testing.T) {
	a, b := claimIDs(t), claimIDs(t)
	overlap := func(x, y identity.Range) bool { return x.First < y.First+y.Size && y.First < x.First+x.Size }
	for _, c := range []struct {
		name string
		x, y identity.Range
	}{{"the two claims", a, b}, {"the first and the default range", a, identity.DefaultRange}, {"the second and the default range", b, identity.DefaultRange}} {
		if overlap(c.x, c.y) {
			t.Errorf("%s overlap: %s and %s", c.name, c.x, c.y)
		}
	}
	if a.Size != idSlotSize || b.Size != idSlotSize {
		t.Errorf("sizes %d, %d: want %d", a.Size, b.Size, idSlotSize)
	}
}

// A process left in a slot (an app of an agent killed without its
// cleanup) is killed when the slot is claimed; one outside it is not.
func TestSweepSlot(t *testing.T) {
	r := identity.Range{First: identity.DefaultRange.First + identity.DefaultRange.Size + idSlots*idSlotSize, Size: idSlotSize}
	start := func(uid int) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	left, outside := start(r.First+7), start(r.First+r.Size)
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	if err := sweepSlot(r); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := <-exited; !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process in the slot: %v, want killed by SIGKILL", err)
	}
	if uids, ok := procUIDs(outside.Process.Pid); !ok || uids[0] != r.First+r.Size {
		t.Errorf("the process outside the slot: %v %v, want it running", uids, ok)
	}
}
