package trampoline

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
)

// An Instance granted root runs as uid 0 in a user namespace of its own
// whose 0 is the Instance's own uid on the node: root to itself and its
// files, nobody to the node's (root-owned files read as "other", /proc
// shows it nothing of anyone else, no capability reaches a namespace the
// node owns). A new user namespace needs a single-threaded caller, which
// a Go process never is, so the trampoline starts the app as a child in
// the namespace and stays beside it as its supervisor: it relays signals
// and ends as the app ended, so the unit manager sees the app's exit.

// InnerFlag is the first argument of the trampoline's child in the user
// namespace; `unitlet exec` and the tests' stand-in dispatch on it.
const InnerFlag = "--userns-inner"

// superviseInUserNS starts the app through the trampoline's own binary in
// a new user namespace, drops the supervisor to the mapped identity, and
// waits. The sandbox is already built on this thread (the child inherits
// its mount and IPC namespaces).
func superviseInUserNS(lf launch.File, env []string, listener int, rec *execRecord) (int, error) {
	m := *lf.UserNamespace
	// The child inherits the groups: none of root's may follow it.
	if err := unix.Setgroups([]int{m.GID}); err != nil {
		return 0, fmt.Errorf("setgroups: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env, cmd.Dir = env, lf.WorkingDir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if listener >= 0 {
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(listener), "listener")} // fd 3
	}
	// The child writes the exec record (the fd after the listener's).
	inner := append(append([]string{lf.Argv[0], InnerFlag}, rec.passTo(cmd)...), "--")
	cmd.Args = append(inner, lf.Argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: m.UID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: m.GID, Size: 1}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:   syscall.SIGKILL,
		// The app's terminal (fd 0) is its own, in a session of its own;
		// the supervisor never takes it.
		Setsid: lf.Terminal != nil, Setctty: lf.Terminal != nil, Ctty: 0,
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start in a user namespace: %w", err)
	}
	if err := drop(launch.Identity{UID: m.UID, GID: m.GID, Groups: []int{m.GID}}); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("drop the supervisor to uid %d: %w", m.UID, err)
	}
	go relay(sigs, cmd.Process)
	_ = cmd.Wait()
	signal.Stop(sigs)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// End the way the app did, so the unit manager records the signal.
		signal.Reset(ws.Signal())
		_ = unix.Kill(unix.Getpid(), ws.Signal())
	}
	return ws.ExitStatus(), nil
}

// relay passes every signal the supervisor gets on to the app, but those
// that concern the supervisor alone.
func relay(sigs <-chan os.Signal, p *os.Process) {
	for s := range sigs {
		switch s {
		case syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPIPE:
			continue
		}
		_ = p.Signal(s)
	}
}

// inner is the child in the user namespace, uid 0 there: it gives up the
// namespace's capabilities, installs the filter and execs args (after
// "--") with the environment it was given.
func inner(args []string) (int, error) {
	rec, args, err := innerRecord(args)
	if err != nil || len(args) < 2 || args[0] != "--" {
		return ExitUsage, fmt.Errorf("usage: unitlet exec %s [%sFD] [%s] -- ARGV... (%v)", InnerFlag, innerRecordFD, innerOnNode, err)
	}
	argv := args[1:]
	if err := emptyBoundingSet(); err != nil {
		return ExitSetup, err
	}
	if err := clearCapabilities(); err != nil {
		return ExitSetup, err
	}
	env := os.Environ()
	first := listenFD
	if os.Getenv("LISTEN_FDS") != "" {
		first = listenFD + 1
		env = setEnv(env, "LISTEN_PID", strconv.Itoa(unix.Getpid()))
	}
	if err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return ExitSetup, fmt.Errorf("close inherited descriptors: %w", err)
	}
	if err := installFilter(); err != nil {
		return ExitSetup, err
	}
	return rec.failed(argv[0], unix.Exec(argv[0], argv, env))
}

func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}
