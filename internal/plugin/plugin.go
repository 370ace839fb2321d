// Package plugin is `kubectl unitlet`: an Instance's logs and one-off
// commands in its environment, served by the agent of the Instance's node
// (agent/endpoint). It finds that agent through the node's
// Enrollment and presents the user's own kubeconfig credentials, which
// the agent has the API server review.
package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/unitlet/unitlet/internal/version"
)

const usage = `kubectl unitlet: an Instance's logs and one-off commands, from its node's agent.

Usage:
  kubectl unitlet logs INSTANCE [-f] [--since 10m|RFC3339] [--generation N] [--role run|seed|sidecar/NAME] [--timestamps] [--prefix]
  kubectl unitlet run INSTANCE [-i] -- COMMAND [ARGS...]
  kubectl unitlet version

Flags for both: [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]

logs needs get on instances/log, run needs create on instances/run (API
group hosting.unitlet.dev), and both get on the node's Enrollment, where
the agent publishes its address and certificate. The agent checks your
kubeconfig's bearer token (TokenReview) or client certificate (the
cluster's client CA) with the API server.
`

// Exit codes of the plugin itself; a run exits with its command's.
const (
	ExitUsage = 2
	ExitError = 1
)

// Main runs the plugin with args (without the program name).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	code := 0
	switch args[0] {
	case "logs":
		err = logsMain(ctx, args[1:], stdout, stderr)
	case "run":
		code, err = runMain(ctx, args[1:], stdin, stdout, stderr)
	case "version":
		err = versionMain(args[1:], stdout)
	default:
		err = usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %v\n\n%s", err, usage)
		return ExitUsage
	case err != nil:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitError
	}
	return code
}

// versionMain prints the plugin's build version (internal/version).
func versionMain(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("version takes no arguments (got %q)", args)}
	}
	_, err := fmt.Fprintln(stdout, version.Get())
	return err
}

// usageError is bad input on the command line.
type usageError struct{ error }

// common are the flags every command takes, as kubectl spells them.
type common struct {
	namespace, kubeconfig, context string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.namespace, "namespace", "", "the Instance's namespace (default: the kubeconfig context's)")
	fs.StringVar(&c.namespace, "n", "", "short for --namespace")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context")
}

// parse parses args with fs and returns the one Instance name and what
// follows "--"; flags may come before or after the name, as with kubectl.
func parse(fs *flag.FlagSet, args []string) (string, []string, error) {
	fs.SetOutput(io.Discard)
	var rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var name string
	for {
		if err := fs.Parse(args); err != nil {
			return "", nil, usageError{err}
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		if name != "" {
			return "", nil, usageError{fmt.Errorf("one Instance at a time (got %q and %q)", name, args[0])}
		}
		name, args = args[0], args[1:]
	}
	if name == "" {
		return "", nil, usageError{errors.New("name the Instance")}
	}
	return name, rest, nil
}
