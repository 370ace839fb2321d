package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/unitlet/unitlet/runtime/logs"
)

// reconnectEvery is how often a follow whose stream was cut (a relay or
// agent restart) asks again.
const reconnectEvery = time.Second

// listInstances is the names of the Instances in ns that selector picks,
// sorted.
func listInstances(ctx context.Context, cfg *rest.Config, ns, selector string) ([]string, error) {
	if _, err := labels.Parse(selector); err != nil {
		return nil, usageError{fmt.Errorf("-l %q: %w", selector, err)}
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", InstanceGVR.GroupVersion(), err)
	}
	list, err := mc.Resource(InstanceGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, describe(err, action{verb: "list", rbac: "the view role grants list on instances"}, target{namespace: ns, name: "Instances"})
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	slices.Sort(names)
	return names, nil
}

// followOptions say how lines are printed and where notes go.
type followOptions struct {
	timestamps, prefix, withName bool
	stderr                       io.Writer
}

// readLog prints t's log once, without following.
func readLog(ctx context.Context, rc rest.Interface, t target, q logQuery, w *lineWriter, fo followOptions) error {
	p := &printer{w: w, target: t, opts: fo}
	err := p.stream(ctx, rc, q)
	return describe(err, readLogs, t)
}

// followAll follows every target at once and returns once all ended.
func followAll(ctx context.Context, rc rest.Interface, targets []target, q logQuery, w *lineWriter, fo followOptions) error {
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { errs[i] = follow(ctx, rc, t, q, w, fo) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// follow streams t's log until ctx ends; when the stream is cut after it
// began (the relay or the agent restarted), it asks again from the last
// line printed. A refusal (4xx) ends it.
func follow(ctx context.Context, rc rest.Interface, t target, q logQuery, w *lineWriter, fo followOptions) error {
	p := &printer{w: w, target: t, opts: fo}
	for {
		err := p.stream(ctx, rc, p.resume(q))
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (!p.opened || !retriable(err)):
			return describe(err, readLogs, t)
		case p.exhausted(q):
			return nil
		}
		if err == nil {
			err = errors.New("the relay ended the stream")
		}
		fmt.Fprintf(fo.stderr, "unitlet: log stream of %s cut (%v); reconnecting\n", t, describe(err, readLogs, t))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectEvery):
		}
	}
}

// printer prints one Instance's records once each, across reconnections.
type printer struct {
	w      *lineWriter
	target target
	opts   followOptions
	// last is the newest time printed; atLast the lines printed at it, so
	// a reconnection asking from last repeats none of them.
	last   time.Time
	atLast map[string]bool
	// read counts the bytes received, against --limit-bytes.
	read int64
	// opened says a stream was opened once: a follow that never began
	// reports its error rather than waiting for a relay that may never
	// come.
	opened bool
}

// resume is q for the next connection: from the last time printed on,
// every line of it (the tail was taken already), and the bytes left.
func (p *printer) resume(q logQuery) logQuery {
	if q.limitBytes > 0 {
		q.limitBytes -= p.read
	}
	if p.last.IsZero() {
		return q
	}
	q.sinceSeconds, q.sinceTime, q.tailLines = 0, p.last, 0
	return q
}

// exhausted says the --limit-bytes budget is spent.
func (p *printer) exhausted(q logQuery) bool { return q.limitBytes > 0 && p.read >= q.limitBytes }

// stream reads one connection's worth of lines.
func (p *printer) stream(ctx context.Context, rc rest.Interface, q logQuery) error {
	body, err := logRequest(rc, p.target, q).Stream(ctx)
	if err != nil {
		return err
	}
	p.opened = true
	defer body.Close()
	r := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := r.ReadString('\n')
		p.read += int64(len(line))
		if line != "" {
			p.print(strings.TrimSuffix(line, "\n"))
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// print writes one line of the relay's stream: a record of the agent's
// log (time, source, text), printed once; anything else as it came.
func (p *printer) print(line string) {
	rec, err := logs.ParseRecord(line)
	if err != nil {
		p.w.WriteLine(p.prefix("") + line)
		return
	}
	switch {
	case rec.Time.Before(p.last):
		return
	case rec.Time.Equal(p.last):
		if p.atLast[rec.Line()] {
			return
		}
	default:
		p.last, p.atLast = rec.Time, map[string]bool{}
	}
	p.atLast[rec.Line()] = true
	var b strings.Builder
	if p.opts.timestamps {
		b.WriteString(rec.Time.Format(time.RFC3339Nano) + " ")
	}
	b.WriteString(p.prefix(rec.Source))
	b.WriteString(rec.Text)
	p.w.WriteLine(b.String())
}

// prefix is "[instance/NAME/SOURCE] " with -l, "[SOURCE] " without.
func (p *printer) prefix(source string) string {
	if !p.opts.prefix {
		return ""
	}
	var parts []string
	if p.opts.withName {
		parts = append(parts, "instance", p.target.name)
	}
	if source != "" {
		parts = append(parts, source)
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, "/") + "] "
}

// lineWriter writes whole lines from several streams; a follow flushes
// each at once.
type lineWriter struct {
	mu    sync.Mutex
	w     *bufio.Writer
	flush bool
}

func newLineWriter(w io.Writer, flushEach bool) *lineWriter {
	return &lineWriter{w: bufio.NewWriter(w), flush: flushEach}
}

func (l *lineWriter) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.WriteString(s + "\n")
	if l.flush {
		_ = l.w.Flush()
	}
}

func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.w.Flush()
}
