package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// adminRBAC is what cordon and drain need, for their help and their
// refusals.
const adminRBAC = "cordon, uncordon and drain are an administrator's: Enrollments are cluster-scoped, " +
	"so they need a ClusterRoleBinding granting get and patch on enrollments.hosting.unitlet.dev " +
	"(cluster-admin has it), and drain list and patch on instances and list on generations in the namespaces it drains"

// fleetClient is a client of the hosting.unitlet.dev CRDs with the
// user's kubeconfig.
func fleetClient(flags *genericclioptions.ConfigFlags) (client.Client, error) {
	cfg, err := restConfig(flags)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", v1.GroupVersion, err)
	}
	return c, nil
}

// fleetError is err of the API server as the user should read it: what
// could not be done (verb what) and why; the status stays reachable.
func fleetError(err error, verb, what string) error {
	var msg string
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		msg = fmt.Sprintf("the API server did not accept your credentials (check --context, --user, --token): %v", err)
	case apierrors.IsForbidden(err):
		msg = fmt.Sprintf("you may not %s %s: %v (403 Forbidden; RBAC: %s)", verb, what, err, adminRBAC)
	case meta.IsNoMatchError(err):
		msg = fmt.Sprintf("could not %s %s: the API server does not serve %s (is unitlet installed?): %v", verb, what, v1.GroupVersion, err)
	default:
		msg = fmt.Sprintf("could not %s %s: %v", verb, what, err)
	}
	return describedError{msg: msg, cause: err}
}

// enrollment is the Enrollment of node: an Enrollment is named after
// its node. A node without one is not enrolled, said as such.
func enrollment(ctx context.Context, c client.Client, node string) (*v1.Enrollment, error) {
	var e v1.Enrollment
	err := c.Get(ctx, client.ObjectKey{Name: node}, &e)
	if apierrors.IsNotFound(err) {
		return nil, describedError{msg: fmt.Sprintf("node %q has no Enrollment: it is not enrolled (kubectl get enrollments lists the nodes)", node), cause: err}
	}
	if err != nil {
		return nil, fleetError(err, "read", "enrollment/"+node)
	}
	return &e, nil
}

// setUnschedulable cordons (true) or uncordons node's Enrollment and
// prints as kubectl does: "enrollment/NODE cordoned", or "already
// cordoned" when there was nothing to change. dryRun asks the API server
// to check the change without storing it.
func setUnschedulable(ctx context.Context, c client.Client, out io.Writer, node string, want, dryRun bool) error {
	e, err := enrollment(ctx, c, node)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "cordoned", false: "uncordoned"}[want]
	if e.Spec.Unschedulable == want {
		_, err := fmt.Fprintf(out, "enrollment/%s already %s\n", node, verb)
		return err
	}
	if err := c.Patch(ctx, e, unschedulablePatch(want), dryRunOpts(dryRun)...); err != nil {
		return fleetError(err, "patch", "enrollment/"+node)
	}
	_, err = fmt.Fprintf(out, "enrollment/%s %s%s\n", node, verb, dryRunSuffix(dryRun))
	return err
}

// unschedulablePatch sets spec.unschedulable, or removes it (false is
// its default) on an uncordon.
func unschedulablePatch(want bool) client.Patch {
	var v any
	if want {
		v = true
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": v}})
	return client.RawPatch(types.MergePatchType, body)
}

func dryRunOpts(dryRun bool) []client.PatchOption {
	if dryRun {
		return []client.PatchOption{client.DryRunAll}
	}
	return nil
}

func dryRunSuffix(dryRun bool) string {
	if dryRun {
		return " (server dry run)"
	}
	return ""
}

// nodeArg is the one NODE argument of cordon, uncordon and drain.
func nodeArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{errors.New("name one node: kubectl unitlet " + cmd.Name() + " NODE")}
	}
	return nil
}

func newCordonCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, cordon bool) *cobra.Command {
	use, short := "cordon", "Mark a node unschedulable: no Instance is placed or moved onto it"
	example := "  kubectl unitlet cordon node-a"
	if !cordon {
		use, short = "uncordon", "Mark a node schedulable again"
		example = "  kubectl unitlet uncordon node-a"
	}
	var dryRun bool
	cmd := &cobra.Command{
		Use:     use + " NODE",
		Short:   short,
		Long:    short + " (spec.unschedulable of its Enrollment, as kubectl " + use + " does for a Node). What runs there keeps running.\n\n" + adminRBAC + ".",
		Example: example,
		Args:    nodeArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := fleetClient(flags)
			if err != nil {
				return err
			}
			return setUnschedulable(cmd.Context(), c, streams.Out, args[0], cordon, dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "ask the API server to check the change without storing it")
	return cmd
}
