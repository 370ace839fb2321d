package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// run through the API server's streaming protocols, served by
// cri-streaming's ServeExec as the relay serves them: stdin reaches the
// command, stdout and stderr come back apart, its exit code is the
// plugin's; refusals before and after the upgrade are messages.
func TestRunThroughAPIServer(t *testing.T) {
	tests := map[string]struct {
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
		wantArgv   []string
		// wantRequests are the run's requests; default: a WebSocket attempt, then SPDY.
		wantRequests []string
	}{
		"exit code and streams apart": {
			args:       []string{"run", "shop-a", "--", "echo-stdin", "3"},
			wantCode:   3,
			wantStdout: "got: ",
			wantStderr: "to stderr",
			wantArgv:   []string{"echo-stdin", "3"},
		},
		"stdin with -i, as exec": {
			args:       []string{"exec", "-i", "shop-a", "--", "echo-stdin", "0"},
			stdin:      "hello\nworld\n",
			wantStdout: "got: hello\nworld\n",
			wantStderr: "to stderr",
			wantArgv:   []string{"echo-stdin", "0"},
		},
		"no stdin without -i": {
			args:       []string{"run", "shop-a", "--", "echo-stdin", "0"},
			stdin:      "not read",
			wantStdout: "got: ",
			wantStderr: "to stderr",
			wantArgv:   []string{"echo-stdin", "0"},
		},
		"-t from a pipe: said, and run without": {
			args:       []string{"run", "-it", "shop-a", "--", "echo-stdin", "0"},
			stdin:      "x",
			wantStdout: "got: x",
			wantStderr: "unitlet: unable to use a TTY: stdin is not a terminal; running without one\nto stderr",
			wantArgv:   []string{"echo-stdin", "0"},
		},
		"refused by the relay in the stream": {
			args:       []string{"run", "shop-a", "--", "refuse"},
			wantCode:   ExitError,
			wantStderr: "error: could not run commands in Instance shop-a in apps: Internal error occurred: error executing command in container: a terminal is not supported yet: run without -t\n",
			wantArgv:   []string{"refuse"},
		},
		"forbidden": {
			args:       []string{"run", "secret", "--", "true"},
			wantCode:   ExitError,
			wantStderr: `error: you may not run commands in Instance secret in apps: instances/run.subresources.hosting.unitlet.dev "secret" is forbidden: User "dev" cannot create resource "instances/run" (403 Forbidden; RBAC: the edit role grants create on instances/run)` + "\n",
			// A refusal of the user is not tried again over SPDY, which
			// would lose its code.
			wantRequests: []string{"GET websocket"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t)
			res := f.runPlugin(t.Context(), strings.NewReader(tc.stdin), nil, tc.args...)
			if diff := cmp.Diff([]any{tc.wantCode, tc.wantStdout, tc.wantStderr}, []any{res.code, res.stdout, res.stderr}); diff != "" {
				t.Errorf("exit code, stdout, stderr (-want,+got):\n%s", diff)
			}
			var argv []string
			select {
			case argv = <-f.started:
			default:
			}
			if diff := cmp.Diff(tc.wantArgv, argv); diff != "" {
				t.Errorf("command run (-want,+got):\n%s", diff)
			}
			checkOnlyAPIServer(t, f, res)
			if tc.wantRequests == nil {
				tc.wantRequests = []string{"GET websocket", "POST spdy"}
			}
			checkProtocols(t, f, tc.wantRequests)
		})
	}
}

// checkProtocols: kubectl's order, WebSocket first and SPDY when the
// upgrade fails (cri-streaming's ServeExec speaks WebSocket only up to
// v4.channel.k8s.io, client-go's WebSocket executor asks for v5).
func checkProtocols(t *testing.T, f *fakeAPI, want []string) {
	t.Helper()
	var got []string
	for _, r := range f.requests() {
		if strings.HasSuffix(r.Path, "/exec") {
			kind := r.Method + " spdy"
			if r.WebSocket {
				kind = r.Method + " websocket"
			}
			got = append(got, kind)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run requests (-want,+got):\n%s", diff)
	}
}

// Ctrl-C during a run: the plugin ends with 130 and the stream is closed,
// so the relay's side of the command ends too.
func TestRunInterrupted(t *testing.T) {
	f := newFakeAPI(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan pluginResult, 1)
	go func() { done <- f.runPlugin(ctx, strings.NewReader(""), nil, "run", "shop-a", "--", "block") }()
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not start")
	}
	cancel()
	res := <-done
	if res.code != ExitInterrupted || !strings.Contains(res.stderr, "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d and a note", res.code, res.stderr, ExitInterrupted)
	}
	checkOnlyAPIServer(t, f, res)
}
