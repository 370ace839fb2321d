// Command unitlet-cluster is what runs once per cluster, in its own
// Deployments: with no subcommand (or "cluster") the cluster side's
// controllers (nodewatch, placement, moves, instance keys, approval),
// "relay" the aggregated API behind `kubectl unitlet logs/run`, "version"
// the build's version.
//
// It is a binary of its own so that no node carries it: the relay's
// front-proxy authentication and delegated authorization link
// k8s.io/apiserver (and with it cel-go, gRPC and OpenTelemetry), which
// the node's binary, `unitlet`, is built without. `unitlet cluster` and
// `unitlet relay` hand over to this binary when it lies beside them.
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/cluster"
	"github.com/unitlet/unitlet/cluster/relay"
	"github.com/unitlet/unitlet/internal/version"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		if sub, ok := subcommands[args[0]]; ok {
			os.Exit(sub(args[1:]))
		}
	}
	os.Exit(cluster.Main(args))
}

var subcommands = map[string]func([]string) int{
	"cluster": cluster.Main,
	// The name the cluster side had while nodewatch was all of it.
	"nodewatch": cluster.Main,
	"relay":     relay.Main,
	"version": func([]string) int {
		fmt.Println(version.Get())
		return 0
	},
}
