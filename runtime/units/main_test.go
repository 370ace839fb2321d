package units

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/unitlet/unitlet/runtime/launch"
)

// TestMain lets the test binary stand in for "unitlet exec" in the units
// it starts, until the real trampoline binary is built by the tests: it
// reads the launch file the same way and execs argv with env exactly.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec" {
		standInExec(os.Args[2:])
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
