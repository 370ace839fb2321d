// Package exitrecord is `unitlet exit-record`: systemd runs it as a
// unit's ExecStopPost, and it turns the environment systemd gives such a
// command ($SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS, $INVOCATION_ID) into
// the exit record the direct backend's shim writes, so both backends
// report an exit the same way.
package exitrecord

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/units/record"
)

// Exit codes of the command.
const (
	ExitUsage = 2
	ExitWrite = 1
)

const usage = "usage: unitlet exit-record --dir DIR --name FILE"

// Main runs `unitlet exit-record` with args (the flags after the
// subcommand), reading systemd's variables from the environment.
func Main(args []string) int {
	return run(args, os.Getenv, os.Stderr, time.Now)
}

func run(args []string, getenv func(string) string, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("exit-record", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "exit dir")
	name := fs.String("name", "", "record file name beneath dir")
	if err := fs.Parse(args); err != nil || *dir == "" || *name == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "unitlet exit-record:", usage)
		return ExitUsage
	}
	e := FromEnv(getenv)
	e.At = now()
	if err := record.Write(*dir, *name, e); err != nil {
		fmt.Fprintln(stderr, "unitlet exit-record:", err)
		return ExitWrite
	}
	return 0
}

// FromEnv builds the record from systemd's ExecStopPost variables.
// EXIT_STATUS is a number for "exited" and a signal name ("TERM") for
// "killed" and "dumped".
func FromEnv(getenv func(string) string) record.Exit {
	e := record.Exit{
		Schema:       record.Schema,
		InvocationID: getenv("INVOCATION_ID"),
		Result:       getenv("SERVICE_RESULT"),
		By:           "systemd",
	}
	status := getenv("EXIT_STATUS")
	switch getenv("EXIT_CODE") {
	case "exited":
		e.Code, _ = strconv.Atoi(status)
	case "killed", "dumped":
		e.Signal = signalNumber(status)
	}
	return e
}

// signalNumber reads "TERM", "SIGTERM" or "15"; 0 when unknown.
func signalNumber(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return int(unix.SignalNum(s))
}
