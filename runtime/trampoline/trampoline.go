// Package trampoline is `unitlet exec`: the first thing a unit runs. It
// reads the launch file beneath its directory (no symlink followed), wires
// stdout and stderr to the instance's log socket or FIFO, keeps its cgroup
// from the addresses the file denies (runtime/netguard), builds the
// sandbox (sandbox.go) and the Instance's world (world.go), drops to the
// launch file's identity with no capability left, installs the system
// call filter (seccomp.go), and execs argv with exactly the launch file's env. It
// execs nothing unless every step before succeeded.
package trampoline

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/netguard"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// Exit codes, as a shell would report them for the same failures.
const (
	ExitUsage      = 2   // bad flags
	ExitLaunchFile = 1   // launch file missing, refused or invalid
	ExitSetup      = 125 // log socket, user or working dir
	ExitCannotExec = 126 // exec failed
	ExitNotFound   = 127 // argv[0] does not exist

	commandName = "unitlet exec"
	usage       = "usage: unitlet exec --launch FILE [--exec-record PATH] [--log-socket PATH | --log-fifo PATH] [--err-socket PATH] [--in-socket PATH]"
)

// Main runs `unitlet exec` with args (the flags after "exec"). It returns
// only on failure, with the exit code, after one line on stderr.
func Main(args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
		fmt.Fprintf(stderr, "%s: %s\n", commandName, msg)
		return code
	}
	if len(args) > 0 && args[0] == InnerFlag {
		runtime.LockOSThread()
		code, err := inner(args[1:])
		return fail(code, "%v", err)
	}
	fs := flag.NewFlagSet(commandName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	launchPath := fs.String("launch", "", "launch file")
	logSocket := fs.String("log-socket", "", "unix socket for stdout and stderr")
	logFIFO := fs.String("log-fifo", "", "named pipe for stdout and stderr (the systemd backend)")
	errSocket := fs.String("err-socket", "", "unix socket for stderr alone (cmd role)")
	inSocket := fs.String("in-socket", "", "unix socket stdin is read from (cmd role)")
	execRecordPath := fs.String("exec-record", "", "file to write an exec failure into (the agent's exit dir)")
	if err := fs.Parse(args); err != nil {
		return fail(ExitUsage, "%v; %s", err, usage)
	}
	if *launchPath == "" || fs.NArg() != 0 || (*logSocket != "" && *logFIFO != "") {
		return fail(ExitUsage, "%s", usage)
	}
	rec, err := openExecRecord(*execRecordPath)
	if err != nil {
		return fail(ExitSetup, "%v", err)
	}
	abs, err := filepath.Abs(*launchPath)
	if err != nil {
		return fail(ExitLaunchFile, "launch file: %v", err)
	}
	lf, err := launch.Read(filepath.Dir(abs), filepath.Base(abs))
	if err == nil {
		lf, err = lf.WithMemoryEnv()
	}
	if err != nil {
		return fail(ExitLaunchFile, "launch file: %v", err)
	}
	if err := wire(*inSocket, *logSocket, *logFIFO, *errSocket); err != nil {
		return fail(ExitSetup, "%v", err)
	}
	term, err := dialTerminal(lf)
	if err != nil {
		return fail(ExitSetup, "%v", err)
	}
	env, listener := lf.Env, -1
	if lf.Listen != nil {
		if env, listener, err = fetchListener(lf); err != nil {
			return fail(ExitSetup, "socket activation: %v", err)
		}
	}
	if err := guardNetwork(lf.NetworkDeny); err != nil {
		return fail(ExitSetup, "network guard: %v", err)
	}
	// Sandbox, credentials and exec on one thread: the mount namespace,
	// capabilities and no-new-privs are per thread (setuid and setgid are
	// set on all threads anyway, by Go's all-threads syscalls).
	runtime.LockOSThread()
	rec.noteNode(lf.Argv[0])
	if err := sandbox(lf.Writable); err != nil {
		return fail(ExitSetup, "sandbox: %v", err)
	}
	if err := makeTerminal(term, lf); err != nil {
		return fail(ExitSetup, "%v", err)
	}
	if lf.UserNamespace != nil {
		code, err := superviseInUserNS(lf, env, listener, rec)
		if err != nil {
			return fail(ExitSetup, "%v", err)
		}
		return code
	}
	if err := drop(lf.Identity); err != nil {
		return fail(ExitSetup, "drop to uid %d: %v", lf.Identity.UID, err)
	}
	if lf.WorkingDir != "" {
		if err := unix.Chdir(lf.WorkingDir); err != nil {
			return fail(ExitSetup, "working dir %s: %v", lf.WorkingDir, err)
		}
	}
	if lf.Terminal != nil {
		if err := terminal.TakeControl(0); err != nil {
			return fail(ExitSetup, "terminal: %v", err)
		}
	}
	// The app gets 0-2 (and its socket at 3): nothing the trampoline
	// inherited from whatever started it.
	if err := unix.CloseRange(listenFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(ExitSetup, "close inherited descriptors: %v", err)
	}
	if listener >= 0 {
		if err := toListenFD(listener); err != nil {
			return fail(ExitSetup, "socket activation: %v", err)
		}
	}
	if err := installFilter(); err != nil {
		return fail(ExitSetup, "%v", err)
	}
	code, err := rec.failed(lf.Argv[0], unix.Exec(lf.Argv[0], lf.Argv, env))
	return fail(code, "%v", err)
}

// guardNetwork keeps the unit's cgroup from reaching deny (launch.File
// validated the addresses).
func guardNetwork(deny []string) error {
	addrs := make([]netip.Addr, 0, len(deny))
	for _, a := range deny {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	return netguard.DenyOwnCgroup(addrs)
}

// wire makes stdin, stdout and stderr the sockets or pipe given ("":
// left as inherited): stdin a run's, both outputs the log socket or FIFO,
// stderr alone a run's second socket (after, so it wins).
func wire(inSocket, logSocket, logFIFO, errSocket string) error {
	steps := []struct {
		what, path string
		do         func(string) error
	}{
		{"stdin socket", inSocket, func(p string) error { return redirect(p, unix.SHUT_WR, 0) }},
		{"log socket", logSocket, func(p string) error { return redirect(p, unix.SHUT_RD, 1, 2) }},
		{"log fifo", logFIFO, func(p string) error { return redirectFIFO(p, 1, 2) }},
		{"stderr socket", errSocket, func(p string) error { return redirect(p, unix.SHUT_RD, 2) }},
	}
	for _, s := range steps {
		if s.path == "" {
			continue
		}
		if err := s.do(s.path); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// redirectFIFO makes the named pipe at path each of fds, opened for
// reading and writing (logs.OpenFIFO): the app holds a reader itself, so
// no agent restart can make its writes fail with EPIPE or kill it with
// SIGPIPE; they block only once the pipe is full and no agent reads.
func redirectFIFO(path string, fds ...int) error {
	f, err := logs.OpenFIFO(path, false)
	if err != nil {
		return err
	}
	defer unix.Close(f)
	for _, fd := range fds {
		if err := unix.Dup3(f, fd, 0); err != nil {
			return fmt.Errorf("dup to fd %d: %w", fd, err)
		}
	}
	return nil
}

// redirect connects to the unix stream socket at path and makes it each of
// the fds given (0, or 1 and 2), shut for the direction the process does
// not use (SHUT_RD for output, SHUT_WR for stdin). The dialed fd itself
// is close-on-exec; dup3 without flags leaves the targets open across
// exec.
func redirect(path string, shut int, fds ...int) error {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: path}); err != nil {
		return fmt.Errorf("connect %s: %w", path, err)
	}
	_ = unix.Shutdown(s, shut)
	for _, fd := range fds {
		if err := unix.Dup3(s, fd, 0); err != nil {
			return fmt.Errorf("dup to fd %d: %w", fd, err)
		}
	}
	return nil
}
