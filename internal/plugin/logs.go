package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
)

// logsOptions are logs' flags as the user gave them.
type logsOptions struct {
	selector       string
	follow         bool
	since          string
	sinceTime      string
	tail           int64
	limitBytes     int64
	generation     int64
	role           string
	timestamps     bool
	prefix         bool
	prefixSet      bool
	maxLogRequests int
}

const logsExample = `  # What the app of Instance shop printed, every generation, oldest first
  kubectl unitlet logs shop

  # And what it prints next, across swaps and agent restarts
  kubectl unitlet logs shop -f --prefix

  # The last 20 lines of generation 2 in the last 10 minutes
  kubectl unitlet logs shop --since 10m --generation 2 --tail 20

  # The seed's lines (or a sidecar's: --role sidecar/NAME)
  kubectl unitlet logs shop --role seed

  # Every Instance labelled app=shop, followed at once, each line prefixed
  kubectl unitlet logs -l app=shop -f`

func newLogsCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := logsOptions{tail: -1, maxLogRequests: 5}
	cmd := &cobra.Command{
		Use:     "logs (NAME | -l SELECTOR) [flags]",
		Short:   "Print the logs of an Instance (or of the Instances a selector picks)",
		Example: logsExample,
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.prefixSet = cmd.Flags().Changed("prefix")
			return runLogs(cmd.Context(), streams, flags, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the Instances whose logs to print (e.g. app=shop)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep streaming new lines, across swaps and agent restarts")
	f.StringVar(&o.since, "since", "", "only lines newer than a duration (10m, 1h) or an RFC 3339 time")
	f.StringVar(&o.sinceTime, "since-time", "", "only lines newer than an RFC 3339 time (2026-01-02T15:04:05Z)")
	f.Int64Var(&o.tail, "tail", o.tail, "only the last N of the selected lines (-1: all)")
	f.Int64Var(&o.limitBytes, "limit-bytes", 0, "stop after this many bytes of log (0: no limit)")
	f.Int64Var(&o.generation, "generation", 0, "only this generation's lines (default: every generation's)")
	f.StringVar(&o.role, "role", "", "whose lines: run (the app, default), seed or sidecar/NAME")
	f.BoolVar(&o.timestamps, "timestamps", false, "start each line with its time")
	f.BoolVar(&o.prefix, "prefix", false, "start each line with its source (g3, seed, sidecar.NAME) and, with -l, its Instance (default: on with -l)")
	f.IntVar(&o.maxLogRequests, "max-log-requests", o.maxLogRequests, "with -l and -f, at most this many Instances followed at once")
	return cmd
}

// logQuery is what the relay is asked for one Instance.
type logQuery struct {
	follow       bool
	sinceSeconds int64
	sinceTime    time.Time
	tailLines    int64 // 0: all
	limitBytes   int64 // 0: no limit
	generation   int64
	role         string
}

// params are the query parameters of instances/log.
func (q logQuery) params() [][2]string {
	var p [][2]string
	add := func(k, v string) { p = append(p, [2]string{k, v}) }
	if q.follow {
		add("follow", "true")
	}
	if q.sinceSeconds > 0 {
		add("sinceSeconds", strconv.FormatInt(q.sinceSeconds, 10))
	}
	if !q.sinceTime.IsZero() {
		add("sinceTime", q.sinceTime.UTC().Format(time.RFC3339Nano))
	}
	if q.tailLines > 0 {
		add("tailLines", strconv.FormatInt(q.tailLines, 10))
	}
	if q.limitBytes > 0 {
		add("limitBytes", strconv.FormatInt(q.limitBytes, 10))
	}
	if q.generation > 0 {
		add("generation", strconv.FormatInt(q.generation, 10))
	}
	if q.role != "" {
		add("role", q.role)
	}
	return p
}

// logRequest is the GET of t's log with q, on the API server of rc.
func logRequest(rc rest.Interface, t target, q logQuery) *rest.Request {
	r := rc.Get().Namespace(t.namespace).Resource(resource).Name(t.name).SubResource(subLog)
	for _, kv := range q.params() {
		r = r.Param(kv[0], kv[1])
	}
	return r
}

// query checks the flags and turns them into the relay's query.
func (o logsOptions) query() (logQuery, error) {
	q := logQuery{follow: o.follow, limitBytes: o.limitBytes, generation: o.generation, role: o.role}
	if o.since != "" && o.sinceTime != "" {
		return q, usageError{errors.New("--since and --since-time: give one")}
	}
	if o.since != "" {
		if d, err := time.ParseDuration(o.since); err == nil {
			if d <= 0 {
				return q, usageError{fmt.Errorf("--since %s: want a positive duration", o.since)}
			}
			q.sinceSeconds = int64((d + time.Second - 1) / time.Second) // rounded up, as kubectl does
		} else if q.sinceTime, err = time.Parse(time.RFC3339, o.since); err != nil {
			return q, usageError{fmt.Errorf("--since %q: want a duration (10m) or an RFC 3339 time", o.since)}
		}
	}
	if o.sinceTime != "" {
		t, err := time.Parse(time.RFC3339, o.sinceTime)
		if err != nil {
			return q, usageError{fmt.Errorf("--since-time %q: want an RFC 3339 time (2026-01-02T15:04:05Z)", o.sinceTime)}
		}
		q.sinceTime = t
	}
	switch {
	case o.tail == 0 || o.tail < -1:
		return q, usageError{fmt.Errorf("--tail %d: want -1 (every line) or a positive count", o.tail)}
	case o.tail > 0:
		q.tailLines = o.tail
	}
	if o.limitBytes < 0 {
		return q, usageError{fmt.Errorf("--limit-bytes %d: want a positive count (0: no limit)", o.limitBytes)}
	}
	if o.generation < 0 {
		return q, usageError{fmt.Errorf("--generation %d: want a generation number (1, 2, ...)", o.generation)}
	}
	if o.maxLogRequests < 1 {
		return q, usageError{fmt.Errorf("--max-log-requests %d: want at least 1", o.maxLogRequests)}
	}
	return q, nil
}

// usePrefix is --prefix as given, else on with -l (as kubectl logs).
func (o logsOptions) usePrefix() bool {
	if o.prefixSet {
		return o.prefix
	}
	return o.selector != ""
}

func runLogs(ctx context.Context, streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, o logsOptions, args []string) error {
	q, err := o.query()
	if err != nil {
		return err
	}
	if (len(args) == 1) == (o.selector != "") {
		return usageError{errors.New("name one Instance, or select Instances with -l SELECTOR (not both)")}
	}
	ns, err := namespace(flags)
	if err != nil {
		return err
	}
	cfg, err := restConfig(flags)
	if err != nil {
		return err
	}
	rc, err := relayClient(cfg)
	if err != nil {
		return err
	}
	targets := []target{{namespace: ns}}
	if o.selector == "" {
		targets[0].name = args[0]
	} else {
		names, err := listInstances(ctx, cfg, ns, o.selector)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			fmt.Fprintf(streams.ErrOut, "No Instances in %s match %q.\n", ns, o.selector)
			return nil
		}
		if targets, err = fanOut(ns, names, o.follow, o.maxLogRequests); err != nil {
			return err
		}
	}
	w := newLineWriter(streams.Out, o.follow)
	defer w.Flush()
	fo := followOptions{timestamps: o.timestamps, prefix: o.usePrefix(), withName: o.selector != "", stderr: streams.ErrOut}
	if !o.follow {
		for _, t := range targets {
			if err := readLog(ctx, rc, t, q, w, fo); err != nil {
				return err
			}
		}
		return nil
	}
	return followAll(ctx, rc, targets, q, w, fo)
}

// fanOut is the Instances a selector picked, one stream each; a follow
// holds them all open at once, so it is bounded as kubectl bounds it.
func fanOut(ns string, names []string, follow bool, maxRequests int) ([]target, error) {
	if follow && len(names) > maxRequests {
		return nil, usageError{fmt.Errorf("you are attempting to follow %d log streams, but maximum allowed concurrency is %d, use --max-log-requests to increase the limit", len(names), maxRequests)}
	}
	targets := make([]target, 0, len(names))
	for _, n := range names {
		targets = append(targets, target{namespace: ns, name: n})
	}
	return targets, nil
}
