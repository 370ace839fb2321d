package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// drainOptions are drain's flags as the user gave them.
type drainOptions struct {
	timeout       time.Duration
	dryRun        bool
	allNamespaces bool
	// interval is how often the drain looks again at what is left.
	interval time.Duration
}

// errTimedOut ends a drain that did not empty the node in --timeout.
var errTimedOut = errors.New("timed out")

const drainLong = `Drain a node: cordon its Enrollment, ask the placement controller to move
each Instance on it whose spec.placement.moves is Allowed (the annotation
hosting.unitlet.dev/move-from), and wait until each of them serves on
another node and its Generations on this one are proven gone (Terminated).
Instances whose moves are Never stay (their data dir lives on the node):
they are listed. Like kubectl drain it looks at every namespace unless -n
names one.

The exit code is 0 when nothing is left on the node, 1 when something is
(an Instance whose moves are Never, or a move not done by --timeout).

` + adminRBAC + `.`

const drainExample = `  # Empty node-a, waiting at most 5 minutes
  kubectl unitlet drain node-a

  # What a drain would do, checked by the API server, changing nothing
  kubectl unitlet drain node-a --dry-run

  # Only the Instances of namespace shop, waiting as long as it takes
  kubectl unitlet drain node-a -n shop --timeout=0`

func newDrainCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := drainOptions{interval: time.Second}
	cmd := &cobra.Command{
		Use:     "drain NODE",
		Short:   "Cordon a node and move its Instances off it (those whose moves are Allowed)",
		Long:    drainLong,
		Example: drainExample,
		Args:    nodeArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.timeout < 0 {
				return usageError{fmt.Errorf("--timeout %s: give a positive duration, or 0 to wait as long as it takes", o.timeout)}
			}
			ns := "" // every namespace, as kubectl drain
			if cmd.Flags().Changed("namespace") {
				if o.allNamespaces {
					return usageError{errors.New("give -n NAMESPACE or -A, not both")}
				}
				ns = *flags.Namespace
			}
			c, err := fleetClient(flags)
			if err != nil {
				return err
			}
			return drain(cmd.Context(), c, streams, args[0], ns, o)
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the moves (0: as long as it takes)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what the drain would do, every change checked by the API server and none stored")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace's Instances (the default unless -n is given)")
	return cmd
}

// drain cordons node, asks the moves of its Instances in ns (every
// namespace when "") and waits until they are done, printing progress.
func drain(ctx context.Context, c client.Client, streams genericiooptions.IOStreams, node, ns string, o drainOptions) error {
	if err := setUnschedulable(ctx, c, streams.Out, node, true, o.dryRun); err != nil {
		return err
	}
	if o.dryRun {
		return drainDryRun(ctx, c, streams.Out, node, ns)
	}
	wait := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeoutCause(ctx, o.timeout, errTimedOut)
		defer cancel()
	}
	seen := map[string]string{}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	var views []instanceView
	for {
		next, err := look(wait, c, node, ns, seen)
		switch {
		case err == nil:
			views = next
			if err := askMoves(wait, c, node, views); err != nil && wait.Err() == nil {
				return err
			}
			printLines(streams.Out, newLines(node, seen, views))
			if pending, stays := outcome(views); len(pending) == 0 {
				return drained(streams.Out, node, stays)
			}
		case wait.Err() != nil: // the timeout, or an interrupt
		case retriable(err): // the API server away for a moment
			fmt.Fprintf(streams.ErrOut, "warning: %v (trying again)\n", err)
		default:
			return err
		}
		select {
		case <-wait.Done():
			return stopped(ctx, streams.ErrOut, node, o.timeout, views)
		case <-tick.C:
		}
	}
}

// look reads the Instances in ns and the Generations on node, and
// assesses them.
func look(ctx context.Context, c client.Client, node, ns string, seen map[string]string) ([]instanceView, error) {
	var insts v1.InstanceList
	if err := c.List(ctx, &insts, client.InNamespace(ns)); err != nil {
		return nil, fleetError(err, "list", "instances"+inNamespace(ns))
	}
	var gens v1.GenerationList
	if err := c.List(ctx, &gens, client.InNamespace(ns), client.MatchingFields{v1.FieldNodeName: node}); err != nil {
		return nil, fleetError(err, "list", "generations"+inNamespace(ns))
	}
	return assess(node, insts.Items, gens.Items, seen), nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return " in every namespace"
	}
	return " in namespace " + ns
}

// askMoves asks the move off node of each Instance of views that has not
// been asked yet, and marks it asked.
func askMoves(ctx context.Context, c client.Client, node string, views []instanceView) error {
	for i := range views {
		if views[i].state != stateAsk {
			continue
		}
		if err := askMove(ctx, c, node, views[i].key, false); err != nil {
			return err
		}
		views[i].state = stateAsked
	}
	return nil
}

// askMove sets the move-from annotation of Instance key (namespace/name)
// to node; one deleted meanwhile needs no move.
func askMove(ctx context.Context, c client.Client, node, key string, dryRun bool) error {
	ns, name, _ := strings.Cut(key, "/")
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1.AnnotationMoveFrom: node}}})
	in := &v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := c.Patch(ctx, in, client.RawPatch(types.MergePatchType, body), dryRunOpts(dryRun)...)
	if err != nil && !apierrors.IsNotFound(err) {
		return fleetError(err, "ask the move of", "instance/"+key)
	}
	return nil
}

func printLines(out io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
}

// drained ends a drain whose moves are done: the node is empty, or what
// stays (moves Never) is an error.
func drained(out io.Writer, node string, stays []instanceView) error {
	if len(stays) > 0 {
		return fmt.Errorf("enrollment/%s is not empty: %d Instance(s) stay, their moves are Never: %s", node, len(stays), keys(stays))
	}
	_, err := fmt.Fprintf(out, "enrollment/%s drained\n", node)
	return err
}

// stopped ends a drain that ran out of time (or was interrupted) with
// what is left on node as last seen.
func stopped(ctx context.Context, stderr io.Writer, node string, timeout time.Duration, views []instanceView) error {
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "unitlet: interrupted; enrollment/%s stays cordoned and the moves asked go on\n", node)
		return exitError{code: ExitInterrupted}
	}
	pending, stays := outcome(views)
	msg := fmt.Sprintf("drain of %s timed out after %s with %d Instance(s) not moved off it", node, timeout, len(pending))
	for _, v := range pending {
		msg += "\n  " + progressLine(node, v)
	}
	if len(stays) > 0 {
		msg += fmt.Sprintf("\nand %d that stay, their moves are Never: %s", len(stays), keys(stays))
	}
	return describedError{msg: msg, cause: errTimedOut}
}

// drainDryRun prints what a drain of node would do, each move asked in a
// dry run the API server checks (so a refusal shows now).
func drainDryRun(ctx context.Context, c client.Client, out io.Writer, node, ns string) error {
	views, err := look(ctx, c, node, ns, map[string]string{})
	if err != nil {
		return err
	}
	for _, v := range views {
		line := progressLine(node, v)
		if v.state == stateAsk {
			if err := askMove(ctx, c, node, v.key, true); err != nil {
				return err
			}
			line = "instance/" + v.key + " would be moved (server dry run)"
		}
		fmt.Fprintln(out, line)
	}
	if _, stays := outcome(views); len(stays) > 0 {
		return fmt.Errorf("enrollment/%s would not be empty: %d Instance(s) would stay, their moves are Never: %s", node, len(stays), keys(stays))
	}
	return nil
}
