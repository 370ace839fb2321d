package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// runOptions are run's flags as the user gave them.
type runOptions struct {
	stdin, tty bool
}

const runExample = `  # A command in the active generation's environment; its exit code is the plugin's
  kubectl unitlet run shop -- /bin/sh -c 'echo $UNITLET_GENERATION; id -u'

  # With this stdin streamed to it while it runs
  kubectl unitlet run -i shop -- /usr/bin/python3 -i

  # A terminal (kubectl's word works too)
  kubectl unitlet exec -it shop -- /bin/sh`

func newRunCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:     "run NAME [-i] [-t] -- COMMAND [ARGS...]",
		Aliases: []string{"exec"},
		Short:   "Run a command in an Instance's environment (its env, uid, dir and sandbox)",
		Example: runExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv, err := splitCommand(args, cmd.ArgsLenAtDash())
			if err != nil {
				return err
			}
			code, err := runCommand(cmd.Context(), streams, flags, o, name, argv)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&o.stdin, "stdin", "i", false, "pass this stdin to the command (default: it reads an empty one)")
	cmd.Flags().BoolVarP(&o.tty, "tty", "t", false, "run the command on a terminal (with -i, from a terminal)")
	return cmd
}

// splitCommand is the Instance's name and the command after "--".
func splitCommand(args []string, dash int) (string, []string, error) {
	switch {
	case dash < 0 || len(args) == dash:
		return "", nil, usageError{errors.New("name the command after --: kubectl unitlet run NAME -- COMMAND [ARGS...]")}
	case dash == 0:
		return "", nil, usageError{errors.New("name the Instance before --: kubectl unitlet run NAME -- COMMAND [ARGS...]")}
	case dash > 1:
		return "", nil, usageError{fmt.Errorf("one Instance at a time (got %q)", args[:dash])}
	}
	return args[0], args[1:], nil
}

// runParams is a run's request, as pods/exec's: the command, which
// streams it has, and whether it is on a terminal (then stderr is part of
// the terminal's output, as with kubectl exec).
func runParams(argv []string, stdin, tty bool) *corev1.PodExecOptions {
	return &corev1.PodExecOptions{Command: argv, Stdin: stdin, Stdout: true, Stderr: !tty, TTY: tty}
}

// runURL is the API server's URL of t's run with p, its query encoded
// as pods/exec's is (p is core/v1's type; the request's group is not).
func runURL(rc rest.Interface, t target, p *corev1.PodExecOptions) (*url.URL, error) {
	q, err := scheme.ParameterCodec.EncodeParameters(p, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("run query: %w", err)
	}
	r := rc.Post().Namespace(t.namespace).Resource(resource).Name(t.name).SubResource(subRun)
	for k, vs := range q {
		for _, v := range vs {
			r = r.Param(k, v)
		}
	}
	return r.URL(), nil
}

// newExecutor speaks the streaming protocols as kubectl exec does:
// WebSocket first, SPDY when the upgrade to it fails (an older proxy).
func newExecutor(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("SPDY client: %w", err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("WebSocket client: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, fallBack)
}

// fallBack says whether a WebSocket failure is worth an attempt over
// SPDY: kubectl's test, except a refusal of the user or of the Instance
// (401, 403, 404), which SPDY would get too, with its code lost.
func fallBack(err error) bool {
	if !httpstream.IsUpgradeFailure(err) && !httpstream.IsHTTPSProxyError(err) {
		return false
	}
	var se apierrors.APIStatus
	if errors.As(upgradeCause(err), &se) {
		switch se.Status().Code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return false
		}
	}
	return true
}

// upgradeCause is the server's answer inside a failed upgrade (a
// metav1.Status, when it sent one), else err.
func upgradeCause(err error) error {
	var ue *httpstream.UpgradeFailureError
	if errors.As(err, &ue) && ue.Cause != nil {
		return ue.Cause
	}
	return err
}

// runCommand runs argv in Instance name and returns its exit code.
func runCommand(ctx context.Context, streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, o runOptions, name string, argv []string) (int, error) {
	ns, err := namespace(flags)
	if err != nil {
		return 0, err
	}
	cfg, err := restConfig(flags)
	if err != nil {
		return 0, err
	}
	rc, err := relayClient(cfg)
	if err != nil {
		return 0, err
	}
	term := newTerminal(streams, o.stdin, o.tty)
	t := target{namespace: ns, name: name}
	u, err := runURL(rc, t, runParams(argv, o.stdin, term.tty))
	if err != nil {
		return 0, err
	}
	ex, err := newExecutor(cfg, u)
	if err != nil {
		return 0, err
	}
	var stdin io.Reader
	if o.stdin {
		stdin = streams.In
	}
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: streams.Out, Stderr: streams.ErrOut, Tty: term.tty}
	if !term.tty {
		return exitCode(ctx, ex.StreamWithContext(ctx, opts), t, streams.ErrOut)
	}
	var code int
	err = term.safe(ctx, func(sizes remotecommand.TerminalSizeQueue) error {
		opts.Stderr, opts.TerminalSizeQueue = nil, sizes
		code, err = exitCode(ctx, ex.StreamWithContext(ctx, opts), t, streams.ErrOut)
		return err
	})
	return code, err
}

// exitCode is the plugin's exit code after a run ended with err: the
// command's, 130 when the plugin was interrupted, else an error.
func exitCode(ctx context.Context, err error, t target, stderr io.Writer) (int, error) {
	var ce exec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ce):
		return ce.Code, nil
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "unitlet: interrupted; the command is stopped")
		return ExitInterrupted, nil
	}
	err = upgradeCause(err)
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return 0, describe(err, runIn, t)
	}
	return 0, fmt.Errorf("could not %s %s: %w", runIn.verb, t, err)
}
