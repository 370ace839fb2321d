package plugin

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/metadata"
)

// registerCompletions completes Instance names (the first argument of
// logs and run), node names (of cordon, uncordon and drain: their
// Enrollments), --namespace and --context; cobra's __complete serves
// them, which kubectl_complete-unitlet calls for kubectl.
func registerCompletions(root *cobra.Command, flags *genericclioptions.ConfigFlags) {
	instances := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 || cmd.ArgsLenAtDash() >= 0 {
			return nil, cobra.ShellCompDirectiveDefault // the command after --: the shell's files
		}
		ns, err := namespace(flags)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd.Context(), flags, InstanceGVR, ns, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	nodes := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd.Context(), flags, enrollmentGVR, "", toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	for _, c := range root.Commands() {
		switch c.Name() {
		case "logs", "run":
			c.ValidArgsFunction = instances
		case "cordon", "uncordon", "drain":
			c.ValidArgsFunction = nodes
		}
	}
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
		return names(cmd.Context(), flags, gvr, "", toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		raw, err := flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for name := range raw.Contexts {
			if strings.HasPrefix(name, toComplete) {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// names lists the names of gvr in ns (all namespaces when "") starting
// with prefix; none when the API server cannot be asked.
func names(ctx context.Context, flags *genericclioptions.ConfigFlags, gvr schema.GroupVersionResource, ns, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	var ri metadata.ResourceInterface = mc.Resource(gvr)
	if ns != "" {
		ri = mc.Resource(gvr).Namespace(ns)
	}
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, it := range list.Items {
		if strings.HasPrefix(it.Name, prefix) {
			out = append(out, it.Name)
		}
	}
	slices.Sort(out)
	return out
}
