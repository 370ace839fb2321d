// Package shim is `unitlet shim`: the direct backend's stand-in for a
// service manager. The agent starts it in a session of its own; it moves
// itself into the unit's cgroup before it runs anything else, starts the
// trampoline (`unitlet exec`) as its child, records the child's pid,
// waits, and records how the child ended. It does not depend on the agent
// once started: the agent may die and restart, and reads the records.
//
// The agent learns the start's fate over the report pipe (fd 3): one line
// "started <pid>", or "refused <reason>" when nothing was exec'd, or
// "uncertain <reason>" when the trampoline may have run. A shim that exits
// without a line may have run anything.
//
// A warm shim ("shim --warm") gets its flags later, as a job on fd 4, and
// exits untouched when that pipe ends without one (see warm.go).
package shim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// ReportFD is the report pipe's descriptor in the shim.
const ReportFD = 3

// Exit codes of the shim itself.
const (
	// ExitRefused: the shim exec'd nothing (bad flags, placement failed,
	// the trampoline could not be started).
	ExitRefused = 120
	// ExitUncertain: the trampoline was started but the shim could not
	// do its bookkeeping; it was killed.
	ExitUncertain = 121
	// ExitNoRecord: the child ended but its exit record could not be
	// written.
	ExitNoRecord = 122
)

// Report line verbs.
const (
	Started   = "started"
	Refused   = "refused"
	Uncertain = "uncertain"
)

// Args are the shim's flags, built by the agent with Args.Flags.
type Args struct {
	CgroupMount string // mount root ("" is the default)
	CgroupRoot  string
	Namespace   string
	Name        string
	Child       string // g<n>, role-seed, role-sidecar-<name>
	ExitDir     string
	Prefix      string // the process's exit-record prefix
	Invocation  string
	Exe         string // the unitlet binary, run as "<Exe> exec ..."
	Launch      string
	LogSocket   string
	ErrSocket   string
	InSocket    string // a command's stdin
	// Sched, when set, is the scheduling the shim and its app run with
	// (the agent's own): a warm shim waits in IdleSched and returns to it.
	Sched *Sched
}

// Flags renders a as the shim's command line (after "shim").
func (a Args) Flags() []string {
	f := []string{
		"--cgroup-mount=" + a.CgroupMount, "--cgroup-root=" + a.CgroupRoot,
		"--namespace=" + a.Namespace, "--name=" + a.Name, "--child=" + a.Child,
		"--exit-dir=" + a.ExitDir, "--prefix=" + a.Prefix, "--invocation=" + a.Invocation,
		"--exe=" + a.Exe, "--launch=" + a.Launch,
	}
	if a.LogSocket != "" {
		f = append(f, "--log-socket="+a.LogSocket)
	}
	if a.ErrSocket != "" {
		f = append(f, "--err-socket="+a.ErrSocket)
	}
	if a.InSocket != "" {
		f = append(f, "--in-socket="+a.InSocket)
	}
	if a.Sched != nil {
		f = append(f, "--sched="+a.Sched.String())
	}
	return f
}

func parse(args []string) (Args, error) {
	var a Args
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for name, p := range map[string]*string{
		"cgroup-mount": &a.CgroupMount, "cgroup-root": &a.CgroupRoot, "namespace": &a.Namespace,
		"name": &a.Name, "child": &a.Child, "exit-dir": &a.ExitDir, "prefix": &a.Prefix,
		"invocation": &a.Invocation, "exe": &a.Exe, "launch": &a.Launch,
		"log-socket": &a.LogSocket, "err-socket": &a.ErrSocket, "in-socket": &a.InSocket,
	} {
		fs.StringVar(p, name, "", name)
	}
	fs.Func("sched", "policy/nice/priority", func(v string) error {
		s, err := ParseSched(v)
		a.Sched = &s
		return err
	})
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() != 0 {
		return a, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name, v := range map[string]string{"child": a.Child, "exit-dir": a.ExitDir, "prefix": a.Prefix,
		"invocation": a.Invocation, "exe": a.Exe, "launch": a.Launch, "namespace": a.Namespace, "name": a.Name} {
		if v == "" {
			return a, fmt.Errorf("--%s is required", name)
		}
	}
	if !filepath.IsAbs(a.Exe) || !filepath.IsAbs(a.ExitDir) {
		return a, fmt.Errorf("--exe and --exit-dir must be absolute")
	}
	return a, nil
}

// Main runs `unitlet shim` with args (the flags after "shim").
func Main(args []string) int {
	// The report pipe is the agent's alone: the app must not inherit it.
	syscall.CloseOnExec(ReportFD)
	report := os.NewFile(ReportFD, "report")
	say := func(verb, msg string) {
		if report == nil {
			return
		}
		// The agent may be gone: a failed write changes nothing here.
		_, _ = fmt.Fprintf(report, "%s %s\n", verb, strings.ReplaceAll(msg, "\n", " "))
		report.Close()
		report = nil
	}
	// Stop signals are for the app: the shim outlives them to record the
	// exit. A handled (not ignored) signal is reset to its default in the
	// exec'd child.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	var a Args
	var err error
	if len(args) == 1 && args[0] == WarmFlag {
		// Idle until the agent hands over a job; a pipe that ends
		// without one (agent gone, pool closed) means: do nothing.
		a, err = readJob()
		if errors.Is(err, errNoJob) {
			return ExitIdle
		}
	} else {
		a, err = parse(args)
	}
	if err != nil {
		say(Refused, "shim: "+err.Error())
		return ExitRefused
	}
	if a.Sched != nil {
		// Before anything else. The agent gave a warm shim the job's
		// scheduling already, but a thread made meanwhile may have
		// missed it, and the trampoline inherits its forking thread's.
		if err := applyAll(*a.Sched); err != nil {
			say(Refused, "shim: scheduling: "+err.Error())
			return ExitRefused
		}
	}
	m, err := cgroups.New(cgroups.Config{MountRoot: a.CgroupMount, Root: a.CgroupRoot}, a.Namespace, a.Name)
	if err == nil {
		err = m.Place(os.Getpid(), a.Child)
	}
	if err != nil {
		say(Refused, "shim: enter cgroup: "+err.Error())
		return ExitRefused
	}
	argv := []string{a.Exe, "exec", "--launch", a.Launch, "--exec-record", filepath.Join(a.ExitDir, a.Prefix+record.ExecSuffix)}
	child := &exec.Cmd{Path: a.Exe, Env: []string{}, Dir: "/"}
	var logsDone <-chan struct{}
	switch {
	case a.ErrSocket != "":
		// A run's streams: the trampoline dials each.
		argv = append(argv, "--log-socket", a.LogSocket, "--err-socket", a.ErrSocket)
		if a.InSocket != "" {
			argv = append(argv, "--in-socket", a.InSocket)
		}
	case a.LogSocket != "":
		// The shim holds the log connection and outlives the agent; the
		// app writes into a pipe that stays open across agent restarts.
		r, w, err := os.Pipe()
		if err != nil {
			say(Refused, "shim: log pipe: "+err.Error())
			return ExitRefused
		}
		child.Stdout, child.Stderr = w, w
		defer w.Close()
		logsDone = forwardLogs(r, a.LogSocket)
	}
	child.Args = argv
	if err := child.Start(); err != nil {
		// Start returns an error only when the exec did not happen.
		say(Refused, "shim: start trampoline: "+err.Error())
		return ExitRefused
	}
	if w, ok := child.Stdout.(*os.File); ok {
		w.Close() // the app's copy is the only writer now: EOF when it is gone
	}
	pid := child.Process.Pid
	err = record.WriteVolatile(a.ExitDir, a.Prefix+record.PidSuffix, record.Pid{
		Schema: record.Schema, InvocationID: a.Invocation, ShimPID: os.Getpid(), MainPID: pid, At: time.Now(),
	})
	if err != nil {
		// Without a pid record no one could find this child's end: stop
		// it, and say that it may have run.
		_ = child.Process.Kill()
		_ = child.Wait()
		say(Uncertain, "shim: pid record: "+err.Error())
		return ExitUncertain
	}
	say(Started, strconv.Itoa(pid))

	_ = child.Wait()
	if err := record.Write(a.ExitDir, a.Prefix+record.ExitSuffix, ExitOf(child.ProcessState, a.Invocation)); err != nil {
		return ExitNoRecord
	}
	if logsDone != nil {
		// The last lines, unless a child the app left behind keeps the
		// pipe open: the record is written, the shim need not wait long.
		select {
		case <-logsDone:
		case <-time.After(time.Second):
		}
	}
	return 0
}

// ExitOf is the exit record of a waited-for process.
func ExitOf(ps *os.ProcessState, invocation string) record.Exit {
	e := record.Exit{Schema: record.Schema, InvocationID: invocation, At: time.Now(), By: "shim"}
	ws, _ := ps.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && ws.CoreDump():
		e.Result, e.Signal = record.ResultCoreDump, int(ws.Signal())
	case ws.Signaled():
		e.Result, e.Signal = record.ResultSignal, int(ws.Signal())
	case ws.ExitStatus() == 0:
		e.Result = record.ResultSuccess
	default:
		e.Result, e.Code = record.ResultExitCode, ws.ExitStatus()
	}
	return e
}
