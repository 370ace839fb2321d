// Command kubectl-unitlet is the kubectl plugin `kubectl unitlet`: an
// Instance's logs and one-off commands in its environment (see
// internal/plugin). On $PATH, kubectl finds it by its name.
package main

import (
	"os"

	"github.com/unitlet/unitlet/internal/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
