// Command unitlet is the node agent and the small helpers it starts: with
// no subcommand (or "agent") it runs the agent; "exec" and "exit-record"
// are the per-unit helper's roles, which units run from unitlet-shim (this
// binary serves them for units an older agent started, and where no
// unitlet-shim lies beside it); "install" copies the binary and the helper
// to the host (the DaemonSet's init container); "cluster" runs what runs once per cluster
// (its own Deployment: nodewatch, which reads the agents' node Leases);
// "relay" serves Instances' logs and runs through the API server (an
// aggregated API, its own Deployment);
// "version" prints the build's version.
//
// The Go runtime keeps its cgroup CPU limit files open from start (fds 3
// and up) and re-reads them to adjust GOMAXPROCS. The trampoline must put
// an activated app's socket at fd 3 just before its exec, over one of
// them: with the re-reads off, nothing of the runtime touches it again.
//
//go:debug updatemaxprocs=0
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/agent"
	"github.com/unitlet/unitlet/agent/selfinstall"
	"github.com/unitlet/unitlet/cluster"
	"github.com/unitlet/unitlet/cluster/relay"
	"github.com/unitlet/unitlet/internal/version"
	"github.com/unitlet/unitlet/runtime/trampoline"
	"github.com/unitlet/unitlet/runtime/units/exitrecord"
	"github.com/unitlet/unitlet/runtime/units/shim"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		if sub, ok := subcommands[args[0]]; ok {
			os.Exit(sub(args[1:]))
		}
	}
	os.Exit(agent.Main(args))
}

// subcommands are the helper roles of the one binary, each a function of
// its arguments returning the exit code.
var subcommands = map[string]func([]string) int{
	"agent": agent.Main,
	"exec":  func(args []string) int { return trampoline.Main(args, os.Stderr) },
	// The trampoline's child in a granted root's user namespace, started
	// as /proc/self/exe with the app's argv[0] in front.
	trampoline.InnerFlag: func(args []string) int {
		return trampoline.Main(append([]string{trampoline.InnerFlag}, args...), os.Stderr)
	},
	"shim":        shim.Main,
	"exit-record": exitrecord.Main,
	"install":     selfinstall.Main,
	"cluster":     cluster.Main,
	// The name the cluster side had while nodewatch was all of it: a
	// Deployment of an earlier release still starts it so.
	"nodewatch": cluster.Main,
	// The aggregated API behind `kubectl unitlet logs/run`.
	"relay": relay.Main,
	"version": func([]string) int {
		fmt.Println(version.Get())
		return 0
	},
}
