package agentproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/identity"
)

// Agents that share a kernel must never give two apps one uid: /proc
// (hidepid=invisible) shows a process to every process of its uid, and a
// file is its owner's. A node runs one agent, which has its whole
// --app-ids range; on this machine several run at once (a fleet's three
// nodes, suites in parallel lanes), so each claims a slot of its own,
// above the default range (which `make run`'s agent keeps).
const (
	idSlotSize = 1024
	idSlots    = 64
)

// claimIDs claims a free slot for t's lifetime: a lock on its file, which
// the kernel drops when the holder exits, however it ends.
func claimIDs(t testing.TB) identity.Range {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "unitlet-test-ids")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	first := identity.DefaultRange.First + identity.DefaultRange.Size
	for i := range idSlots {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%d", i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		// One lock per open file: a second agent of this process tries
		// with an open of its own, and so is refused too.
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			t.Fatalf("claim uid slot %d: %v", i, err)
		}
		t.Cleanup(func() { f.Close() })
		return identity.Range{First: first + i*idSlotSize, Size: idSlotSize}
	}
	t.Fatalf("all %d uid slots of %s are held by agents running on this machine", idSlots, dir)
	return identity.Range{}
}
