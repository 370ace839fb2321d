package units

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout/layouttest"
	"github.com/unitlet/unitlet/runtime/units/exitrecord"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

// TestMain lets the test binary be the unitlet binary of the units it
// starts: "shim" and "exit-record" run the real package Mains, as main.go
// wires them; "exec" is a stand-in for the trampoline that reads the
// launch file the same way and execs argv with env exactly; "starter"
// is an agent that is killed mid-start (see direct_fault_test.go).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "exec":
			standInExec(os.Args[2:])
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "exit-record":
			os.Exit(exitrecord.Main(os.Args[2:]))
		case "starter":
			os.Exit(starterMain(os.Args[2:]))
		}
	}
	if os.Geteuid() == 0 {
		layouttest.SweepOld(directPrefix)
	}
	os.Exit(m.Run())
}

// Exit codes of the stand-in; 121 is its refusal before exec.
const (
	standInRefused = 121
	standInNoExec  = 127
)

func standInExec(args []string) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	file := fs.String("launch", "", "launch file")
	_ = fs.String("log-socket", "", "log socket")
	_ = fs.String("log-fifo", "", "log fifo")
	_ = fs.String("err-socket", "", "a run's stderr socket")
	_ = fs.String("in-socket", "", "a run's stdin socket")
	_ = fs.String("exec-record", "", "the exec-failure record (the trampoline writes it)")
	if err := fs.Parse(args); err != nil {
		os.Exit(standInRefused)
	}
	f, err := launch.Read(filepath.Dir(*file), filepath.Base(*file))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(standInRefused)
	}
	err = syscall.Exec(f.Argv[0], f.Argv, f.Env)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(standInNoExec)
}
