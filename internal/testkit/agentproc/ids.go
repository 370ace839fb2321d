package agentproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
		r := identity.Range{First: first + i*idSlotSize, Size: idSlotSize}
		if err := sweepSlot(r); err != nil {
			t.Fatalf("uid slot %d: %v", i, err)
		}
		return r
	}
	t.Fatalf("all %d uid slots of %s are held by agents running on this machine", idSlots, dir)
	return identity.Range{}
}

// sweepSlot kills what a dead holder of slot r left running. The direct
// backend's apps outlive their agent by design, and a test killed by a
// signal it cannot catch never stops them: the next agent in the slot
// would give their uids to its own apps, which would then see them. With
// the slot's lock held, no live agent owns these uids.
func sweepSlot(r identity.Range) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := slotProcesses(r)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of a gone agent's apps outlive SIGKILL: %v", left)
		}
		for _, pid := range left {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slotProcesses are the processes whose real or effective uid is in r
// (zombies included: their parent has yet to reap them).
func slotProcesses(r identity.Range) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uids, ok := procUIDs(pid); ok && (r.Contains(uids[0]) || r.Contains(uids[1])) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procUIDs is a process's real and effective uid, from its status.
func procUIDs(pid int) ([2]int, bool) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return [2]int{}, false // gone meanwhile
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return [2]int{}, false
		}
		ruid, err1 := strconv.Atoi(f[0])
		euid, err2 := strconv.Atoi(f[1])
		return [2]int{ruid, euid}, err1 == nil && err2 == nil
	}
	return [2]int{}, false
}
