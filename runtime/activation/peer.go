package activation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5): a pidfd of the very process
// that connected, with no pid to reuse in between.
const soPeerPidfd = 77

// errNotPlaced is returned for a caller in none of the offer's cgroups.
var errNotPlaced = errors.New("caller is not in its unit's cgroup")

// checkPeer lets c's peer through only if it is root and one of its
// cgroups is (or ends with) one of want. The peer is pinned by a pidfd
// before its cgroups are read, and that pidfd must still name a live
// process after the read: its pid cannot have been reused in between.
// The pidfd comes from SO_PEERPIDFD where the kernel has it; before 6.5
// (Debian 12's 6.1) from pidfd_open on the SO_PEERCRED pid, which leaves
// only the connect-to-open window, while the caller waits on its answer.
func checkPeer(c *net.UnixConn, want []string) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	pidfd, cerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if cerr == nil {
			pidfd, cerr = peerPidfd(int(fd), int(cred.Pid))
		}
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	defer unix.Close(pidfd)
	if cred.Uid != 0 {
		return fmt.Errorf("caller uid %d is not root", cred.Uid)
	}
	cgs, err := os.ReadFile("/proc/" + strconv.Itoa(int(cred.Pid)) + "/cgroup")
	if err != nil {
		return fmt.Errorf("cgroups of caller %d: %w", cred.Pid, err)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("caller %d gone while checked: %w", cred.Pid, err)
	}
	if !inCgroup(cgs, want) {
		return fmt.Errorf("%w: pid %d", errNotPlaced, cred.Pid)
	}
	return nil
}

// peerPidfd is the peer's pidfd: SO_PEERPIDFD, else pidfd_open(pid) when
// the kernel lacks the option (ENOPROTOOPT).
func peerPidfd(sock, pid int) (int, error) {
	fd, err := peerPidfdOpt(sock)
	if err == nil {
		if p, perr := pidfdPid(fd); perr != nil || p != pid {
			unix.Close(fd)
			return -1, fmt.Errorf("SO_PEERPIDFD names pid %d, SO_PEERCRED %d (%v)", p, pid, perr)
		}
		return fd, nil
	}
	if !errors.Is(err, unix.ENOPROTOOPT) {
		return -1, fmt.Errorf("SO_PEERPIDFD: %w", err)
	}
	return unix.PidfdOpen(pid, 0)
}

// peerPidfdOpt reads SO_PEERPIDFD; tests swap it to show the fallback,
// which a kernel that has the option cannot produce on demand.
var peerPidfdOpt = func(sock int) (int, error) {
	return unix.GetsockoptInt(sock, unix.SOL_SOCKET, soPeerPidfd)
}

// pidfdPid reads the pid a pidfd names from its fdinfo.
func pidfdPid(fd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return -1, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return -1, errors.New("no Pid in pidfd fdinfo")
}

// inCgroup reports whether a /proc/<pid>/cgroup listing ("id:ctrls:path"
// lines, one per hierarchy) places the process in one of want, each
// relative to a hierarchy's root: the agent may see the hierarchy from a
// cgroup namespace, so a path matches want or ends in "/"+want.
func inCgroup(listing []byte, want []string) bool {
	sc := bufio.NewScanner(bytes.NewReader(listing))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		p := parts[2]
		for _, w := range want {
			w = "/" + strings.Trim(w, "/")
			if w != "/" && (p == w || strings.HasSuffix(p, w)) {
				return true
			}
		}
	}
	return false
}
