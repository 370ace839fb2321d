// Command unitlet-shim holds the per-unit roles apart from the agent's
// binary: "shim", the direct backend's parent that stays beside every app
// for its whole life; "exec", the trampoline both backends start in the
// app's cgroup; and "exit-record", systemd's ExecStopPost. The unitlet
// binary has the same roles, but every package the agent links is
// initialised in each of its processes: ~40 MiB resident and 450 package
// inits, charged to the app's tier before the app runs. This binary links
// only what the roles need. The agent uses it when it lies beside the
// agent's own binary (see --shim-binary); `unitlet install` puts it there.
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/runtime/trampoline"
	"github.com/unitlet/unitlet/runtime/units/exitrecord"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: unitlet-shim shim|exec|exit-record ...")
		os.Exit(2)
	}
	switch args := os.Args[2:]; os.Args[1] {
	case "shim":
		os.Exit(shim.Main(args))
	case "exec":
		os.Exit(trampoline.Main(args, os.Stderr))
	case "exit-record":
		os.Exit(exitrecord.Main(args))
	case trampoline.InnerFlag:
		// The trampoline's child in a granted root's user namespace: it
		// re-executes /proc/self/exe, which is this binary when the
		// trampoline ran as it.
		os.Exit(trampoline.Main(append([]string{trampoline.InnerFlag}, args...), os.Stderr))
	default:
		fmt.Fprintf(os.Stderr, "unitlet-shim: unknown role %q (want shim, exec or exit-record)\n", os.Args[1])
		os.Exit(2)
	}
}
