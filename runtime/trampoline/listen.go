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

// fetchListener fetches the generation's socket (close-on-exec, moved to
// fd 3 only just before the exec: see main.go on the runtime's fds) and
// returns the env the app is exec'd with: the launch file's, with
// LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES set by the platform (the app
// keeps the trampoline's pid across exec).
func fetchListener(lf launch.File) ([]string, int, error) {
	fd, err := activation.Fetch(lf.Listen.Handoff, lf.Listen.Key)
	if err != nil {
		return nil, -1, err
	}
	env := make([]string, 0, len(lf.Env)+3)
	for _, e := range lf.Env {
		if k, _, _ := strings.Cut(e, "="); k != "LISTEN_FDS" && k != "LISTEN_PID" && k != "LISTEN_FDNAMES" {
			env = append(env, e)
		}
	}
	return append(env, "LISTEN_FDS=1", "LISTEN_PID="+strconv.Itoa(unix.Getpid()), "LISTEN_FDNAMES=app"), fd, nil
}

// toListenFD makes fd the app's fd 3, open across exec. Whatever the
// runtime held there is not touched again (main.go).
func toListenFD(fd int) error {
	if fd == listenFD {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
		return err
	}
	if err := unix.Dup3(fd, listenFD, 0); err != nil {
		return fmt.Errorf("dup to fd %d: %w", listenFD, err)
	}
	return nil
}
