package trampoline

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/activation"
	"github.com/unitlet/unitlet/runtime/launch"
)

// listenFD is where sd_listen_fds expects the first socket.
const listenFD = 3

// reserveListenFD takes fd 3 (/dev/null, close-on-exec) before anything
// else of the trampoline opens a descriptor, so that putting the socket
// there later cannot clobber one of the Go runtime's own (its epoll). It
// reports whether fd 3 is the trampoline's.
func reserveListenFD() bool {
	if _, err := unix.FcntlInt(listenFD, unix.F_GETFD, 0); err == nil {
		return false // inherited, or the runtime's: not ours to replace
	}
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	if fd != listenFD {
		unix.Close(fd)
		return false
	}
	return true
}

// takeListener fetches the generation's socket, puts it at fd 3 (open
// across exec) and returns the env the app is exec'd with: the launch
// file's, with LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES set by the
// platform (the app keeps its pid across exec).
func takeListener(lf launch.File) ([]string, error) {
	fd, err := activation.Fetch(lf.Listen.Handoff, lf.Listen.Key)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.Dup3(fd, listenFD, 0); err != nil {
		return nil, fmt.Errorf("dup to fd %d: %w", listenFD, err)
	}
	env := make([]string, 0, len(lf.Env)+3)
	for _, e := range lf.Env {
		if k, _, _ := strings.Cut(e, "="); k != "LISTEN_FDS" && k != "LISTEN_PID" && k != "LISTEN_FDNAMES" {
			env = append(env, e)
		}
	}
	return append(env, "LISTEN_FDS=1", "LISTEN_PID="+strconv.Itoa(unix.Getpid()), "LISTEN_FDNAMES=app"), nil
}
