// Command unitlet is the node's binary: the agent and the small helpers it
// starts. With no subcommand (or "agent") it runs the agent; "exec" and
// "exit-record" are the per-unit helper's roles, which units run from
// unitlet-shim (this binary serves them for units an older agent started,
// and where no unitlet-shim lies beside it); "install" copies the binary
// and the helper to the host (the DaemonSet's init container); "version"
// prints the build's version. "cluster" and "relay" (what runs once per
// cluster) are unitlet-cluster's: this binary hands them over to it when
// it lies beside, as it does in the image, so a Deployment of an earlier
// release still starts.
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
	"path/filepath"
	"syscall"

	"github.com/unitlet/unitlet/agent"
	"github.com/unitlet/unitlet/agent/selfinstall"
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
	// The cluster side, its own binary (cmd/unitlet-cluster); "nodewatch"
	// is the name it had while nodewatch was all of it.
	"cluster":   handOver("cluster"),
	"nodewatch": handOver("nodewatch"),
	"relay":     handOver("relay"),
	"version": func([]string) int {
		fmt.Println(version.Get())
		return 0
	},
}

// handOver runs subcommand sub of unitlet-cluster beside this binary in
// this process's place (exec: its pid, its signals); exit code 2 with
// what to run when there is none.
func handOver(sub string) func([]string) int {
	return func(args []string) int {
		self, err := os.Executable()
		if err == nil {
			path := filepath.Join(filepath.Dir(self), selfinstall.ClusterName)
			err = syscall.Exec(path, append([]string{path, sub}, args...), os.Environ())
			err = fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(os.Stderr, "unitlet: %q is the cluster side's, in its own binary %s (cmd/unitlet-cluster), which could not be run: %v\n", sub, selfinstall.ClusterName, err)
		return 2
	}
}
