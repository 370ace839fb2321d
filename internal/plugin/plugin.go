// Package plugin is `kubectl unitlet`: an Instance's logs and one-off
// commands in its environment. It talks to the API server alone, as
// kubectl does for pods: the subresources instances/log and instances/run
// of the aggregated API subresources.hosting.unitlet.dev/v1, which the
// unitlet relay serves by reaching the Instance's node agent with an
// identity of its own. No credential of the user ever leaves for a node.
package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/unitlet/unitlet/internal/version"
)

// Exit codes of the plugin itself; a run exits with its command's.
const (
	ExitError = 1
	ExitUsage = 2
	// ExitInterrupted is a run the plugin was interrupted in (Ctrl-C):
	// the relay and the agent stop the command.
	ExitInterrupted = 130
)

// Main runs the plugin with args (without the program name) and returns
// its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, genericiooptions.IOStreams{In: stdin, Out: stdout, ErrOut: stderr}, args)
}

// Run runs the plugin with args (without the program name) on streams
// until ctx ends, and returns its exit code: the command line as a
// function, for a Go test (e.g. "--kubeconfig", path, "drain", node).
func Run(ctx context.Context, streams genericiooptions.IOStreams, args []string) int {
	flags := genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithWarningPrinter(streams)
	return Execute(ctx, NewCommand(streams, flags), args, streams.ErrOut)
}

// Execute runs cmd with args and maps what it returned to an exit code.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue) || isCobraUsage(err):
		fmt.Fprintf(stderr, "error: %v\nSee 'kubectl unitlet --help'.\n", err)
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitError
	}
}

// NewCommand is the root command: kubectl's connection flags (flags) on
// every subcommand, klog's -v, and logs, run (exec), cordon, uncordon,
// drain and version.
func NewCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl unitlet",
		Short: "Logs and one-off commands of unitlet Instances, and cordon and drain of nodes, through the API server",
		Long: `kubectl unitlet reads an Instance's logs and runs one-off commands in its
environment through the API server (the aggregated API
subresources.hosting.unitlet.dev/v1, served by the unitlet relay), as
kubectl logs and kubectl exec do for pods.

cordon, uncordon and drain act on a node's Enrollment as kubectl cordon,
uncordon and drain do on a Node: drain moves the node's Instances whose
spec.placement.moves is Allowed and lists those that stay.

logs needs get on instances/log (the view role grants it), run and exec
need create on instances/run (edit grants it); cordon, uncordon and drain
are an administrator's (Enrollments are cluster-scoped).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// "kubectl unitlet" has a space: cobra's name is its first word,
		// so name it so help and completion print it whole.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl unitlet"},
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	addKlogFlags(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newLogsCommand(streams, flags), newRunCommand(streams, flags),
		newCordonCommand(streams, flags, true), newCordonCommand(streams, flags, false), newDrainCommand(streams, flags),
		newVersionCommand(streams))
	registerCompletions(root, flags)
	return root
}

// addKlogFlags adds klog's -v to every command: -v=6 shows each request
// to the API server, as with kubectl.
func addKlogFlags(root *cobra.Command) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for _, name := range []string{"v", "vmodule"} {
		root.PersistentFlags().AddGoFlag(fs.Lookup(name))
	}
}

func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(streams.Out, version.Get())
			return err
		},
	}
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments (got %q)", cmd.Name(), args)}
	}
	return nil
}

// usageArgs makes cobra's check of the arguments a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// usageError is bad input on the command line.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitError ends the plugin with code and nothing more to print (a run's
// command exited with it).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// isCobraUsage is cobra's own usage error (an unknown command).
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}
