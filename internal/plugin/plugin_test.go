package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/logs"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		args     []string
		wantName string
		wantNS   string
		wantRest []string
		wantErr  bool
	}{
		"name only":            {args: []string{"shop"}, wantName: "shop"},
		"flag before":          {args: []string{"-n", "apps", "shop"}, wantName: "shop", wantNS: "apps"},
		"flag after":           {args: []string{"shop", "--namespace=apps"}, wantName: "shop", wantNS: "apps"},
		"command after --":     {args: []string{"shop", "--", "sh", "-c", "exit 3"}, wantName: "shop", wantRest: []string{"sh", "-c", "exit 3"}},
		"flags of the command": {args: []string{"-n", "apps", "shop", "--", "ls", "-n"}, wantName: "shop", wantNS: "apps", wantRest: []string{"ls", "-n"}},
		"no name":              {args: []string{"-n", "apps"}, wantErr: true},
		"two names":            {args: []string{"shop", "ledger"}, wantErr: true},
		"unknown flag":         {args: []string{"shop", "--frobnicate"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c common
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			c.register(fs)
			got, rest, err := parse(fs, tc.args)
			var ue usageError
			if (err != nil) != tc.wantErr || (err != nil && !errors.As(err, &ue)) {
				t.Fatalf("err = %v, want a usage error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff([]any{tc.wantName, tc.wantNS, tc.wantRest}, []any{got, c.namespace, rest}); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestCopyFrames(t *testing.T) {
	var in bytes.Buffer
	_ = agentapi.WriteFrame(&in, agentapi.FrameStdout, []byte("out1 "))
	_ = agentapi.WriteFrame(&in, agentapi.FrameStderr, []byte("err"))
	_ = agentapi.WriteFrame(&in, agentapi.FrameStdout, []byte("out2"))
	_ = agentapi.WriteFrame(&in, agentapi.FrameExit, []byte(`{"name":"run-1","exitCode":3}`))
	var out, errs bytes.Buffer
	code, err := copyFrames(&in, &out, &errs)
	if err != nil || code != 3 || out.String() != "out1 out2" || errs.String() != "err" {
		t.Errorf("copyFrames = %d, %v; stdout %q, stderr %q", code, err, out.String(), errs.String())
	}

	in.Reset()
	_ = agentapi.WriteFrame(&in, agentapi.FrameStdout, []byte("partial"))
	if _, err := copyFrames(&in, &out, &errs); err == nil || !strings.Contains(err.Error(), "before its exit") {
		t.Errorf("a stream cut before its exit: %v", err)
	}
	in.Reset()
	_ = agentapi.WriteFrame(&in, agentapi.FrameError, []byte("run not started: no launch file"))
	if _, err := copyFrames(&in, &out, &errs); err == nil || err.Error() != "run not started: no launch file" {
		t.Errorf("an error frame: %v", err)
	}
}

// A reconnection asks again from the last time printed: what was printed
// at that time is not printed twice, what is new at it is.
func TestPrinterPrintsOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := func(d time.Duration, text string) logs.Record {
		return logs.Record{Time: t0.Add(d), Source: "g1", Text: text}
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	p := printer{w: w, flags: logsFlags{prefix: true}}
	for _, r := range []logs.Record{rec(0, "a"), rec(time.Millisecond, "b"), rec(time.Millisecond, "c")} {
		p.print(r)
	}
	// Reconnected: from the last time, again.
	for _, r := range []logs.Record{rec(time.Millisecond, "b"), rec(time.Millisecond, "c"), rec(time.Millisecond, "c2"), rec(2*time.Millisecond, "d")} {
		p.print(r)
	}
	w.Flush()
	if d := cmp.Diff("[g1] a\n[g1] b\n[g1] c\n[g1] c2\n[g1] d\n", b.String()); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
