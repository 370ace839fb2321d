package relay

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/unitlet/unitlet/internal/agentapi"
)

func TestLogQuery(t *testing.T) {
	tests := map[string]struct {
		query   string
		want    agentapi.LogQuery
		wantErr bool
	}{
		"nothing":              {want: agentapi.LogQuery{}},
		"every parameter":      {query: "follow=true&sinceSeconds=90&tailLines=5&limitBytes=10&generation=2&role=sidecar/db", want: agentapi.LogQuery{Follow: true, Since: "1m30s", TailLines: 5, LimitBytes: 10, Generation: 2, Role: "sidecar/db"}},
		"sinceTime in UTC":     {query: "sinceTime=2026-01-01T02:00:00%2B02:00", want: agentapi.LogQuery{Since: "2026-01-01T00:00:00Z"}},
		"both since":           {query: "sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z", wantErr: true},
		"a bad sinceTime":      {query: "sinceTime=yesterday", wantErr: true},
		"zero sinceSeconds":    {query: "sinceSeconds=0", wantErr: true},
		"zero tailLines":       {query: "tailLines=0", wantErr: true},
		"negative limitBytes":  {query: "limitBytes=-1", wantErr: true},
		"a bad follow":         {query: "follow=maybe", wantErr: true},
		"timestamps not given": {query: "timestamps=true", wantErr: true},
		"previous not given":   {query: "previous=true", wantErr: true},
		"previous=false is ok": {query: "previous=false", want: agentapi.LogQuery{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := logQuery(v)
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Fatalf("error %v (-want,+got):\n%s", err, diff)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("query (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func TestExecOptions(t *testing.T) {
	tests := map[string]struct {
		query    string
		wantOpts *remotecommand.Options
		wantCmd  []string
		wantErr  bool
	}{
		"kubectl's query": {query: "command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&stderr=true&tty=false",
			wantOpts: &remotecommand.Options{Stdin: true, Stdout: true, Stderr: true}, wantCmd: []string{"sh", "-c", "echo hi"}},
		"1 as true":  {query: "command=true&stdout=1", wantOpts: &remotecommand.Options{Stdout: true}, wantCmd: []string{"true"}},
		"no command": {query: "stdout=true", wantErr: true},
		"no stream":  {query: "command=true", wantErr: true},
		"a terminal": {query: "command=sh&stdin=true&stdout=true&tty=true", wantOpts: &remotecommand.Options{Stdin: true, Stdout: true, TTY: true}, wantCmd: []string{"sh"}},
		"a terminal's stderr is its stdout": {query: "command=sh&stdout=true&stderr=true&tty=true",
			wantOpts: &remotecommand.Options{Stdout: true, TTY: true}, wantCmd: []string{"sh"}},
		"a bad boolean":  {query: "command=true&stdout=yes", wantErr: true},
		"an empty argv0": {query: "command=&stdout=true", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			opts, cmd, err := execOptions(v)
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Fatalf("error %v (-want,+got):\n%s", err, diff)
			}
			if diff := cmp.Diff([]any{tc.wantOpts, tc.wantCmd}, []any{opts, cmd}); diff != "" {
				t.Errorf("options (-want,+got):\n%s", diff)
			}
		})
	}
}
