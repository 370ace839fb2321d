package plugin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/logs"
)

// reconnectEvery is how often a follow whose stream was cut (an agent
// restart) tries again.
const reconnectEvery = time.Second

type logsFlags struct {
	common
	query      agentapi.LogQuery
	timestamps bool
	prefix     bool
}

func logsMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f logsFlags
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	f.register(fs)
	fs.BoolVar(&f.query.Follow, "follow", false, "keep streaming new lines, across swaps and agent restarts")
	fs.BoolVar(&f.query.Follow, "f", false, "short for --follow")
	fs.StringVar(&f.query.Since, "since", "", "only lines newer than a duration (10m) or an RFC 3339 time")
	fs.Int64Var(&f.query.Generation, "generation", 0, "only this generation's lines (default: every generation's)")
	fs.StringVar(&f.query.Role, "role", "", "whose lines: run (the app, default), seed or sidecar/NAME")
	fs.BoolVar(&f.timestamps, "timestamps", false, "start each line with its time")
	fs.BoolVar(&f.prefix, "prefix", false, "start each line with its source (g3, seed, sidecar.NAME)")
	name, rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("logs takes no command (got %q)", rest)}
	}
	if f.query.Generation < 0 {
		return usageError{fmt.Errorf("--generation %d: want a generation number (1, 2, ...)", f.query.Generation)}
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	p := printer{w: w, flags: f}
	for {
		err := p.stream(ctx, name)
		if !f.query.Follow || ctx.Err() != nil {
			return ignoreCancel(ctx, err)
		}
		var se statusError
		var ce connectError
		if errors.As(err, &ce) || (errors.As(err, &se) && se.code < 500) {
			return err // the Instance, its Enrollment or the user's rights: asking again changes nothing
		}
		// The agent went away (a restart, a roll): follow it to its next
		// self, from the last line printed.
		if err != nil {
			fmt.Fprintf(stderr, "unitlet: log stream cut (%v); reconnecting\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectEvery):
		}
	}
}

// printer prints records once each, across reconnections.
type printer struct {
	w     *bufio.Writer
	flags logsFlags
	// last is the newest time printed; atLast the lines printed at it, so
	// a reconnection asking from last repeats none of them.
	last   time.Time
	atLast map[string]bool
}

// stream reads one connection's worth of lines.
func (p *printer) stream(ctx context.Context, name string) error {
	a, err := connect(ctx, p.flags.common, name)
	if err != nil {
		return connectError{err}
	}
	q := p.flags.query
	if !p.last.IsZero() {
		q.Since = p.last.Format(time.RFC3339Nano)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url(agentapi.LogPath(a.namespace, name), q.Encode()), nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("agent of node %s: %w", a.node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rec, err := logs.ParseRecord(sc.Text())
		if err != nil {
			continue
		}
		p.print(rec)
		if q.Follow {
			if err := p.w.Flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if q.Follow {
		return errors.New("the agent ended the stream")
	}
	return nil
}

func (p *printer) print(rec logs.Record) {
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
	if p.flags.timestamps {
		b.WriteString(rec.Time.Format(time.RFC3339Nano) + " ")
	}
	if p.flags.prefix {
		b.WriteString("[" + rec.Source + "] ")
	}
	b.WriteString(rec.Text)
	b.WriteByte('\n')
	_, _ = p.w.WriteString(b.String())
}

// connectError is a failure to find the agent (from the kubeconfig and
// the API server), not to reach it.
type connectError struct{ error }

func (e connectError) Unwrap() error { return e.error }

// statusError is an answer other than 200 from the agent.
type statusError struct {
	code int
	msg  string
}

func (e statusError) Error() string { return fmt.Sprintf("agent: %d %s", e.code, e.msg) }

func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return statusError{code: resp.StatusCode, msg: strings.TrimSpace(string(b))}
}

func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
