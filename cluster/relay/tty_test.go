package relay_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// TestTerminalThroughAPIServer: `run -it` through the API server, on
// both of kubectl's protocols: the agent gets a TTY run with the
// client's first size, and a later resize reaches it as a resize frame.
func TestTerminalThroughAPIServer(t *testing.T) {
	h := startHarness(t)
	for name, method := range map[string]string{"SPDY": http.MethodPost, "WebSocket": http.MethodGet} {
		t.Run(name, func(t *testing.T) {
			out, err := runOnTerminal(t, h.runner, method, instancePath("web", "run"))
			want := "size 80x24\r\nresized 132x50\r\n"
			if diff := cmp.Diff([]any{want, 4}, []any{out, exitCode(err)}); diff != "" {
				t.Errorf("run -it (-want,+got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// sizes is the client's terminal: 80x24 at once, 132x50 once the
// command said its first size.
type sizes struct {
	next chan remotecommand.TerminalSize
}

func (s *sizes) Next() *remotecommand.TerminalSize {
	n, ok := <-s.next
	if !ok {
		return nil
	}
	return &n
}

// syncBuffer is the terminal's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runOnTerminal runs "tty" as `kubectl exec -it` does (stdin, a terminal,
// its size queue) and resizes once the first size came back.
func runOnTerminal(t *testing.T, cfg *rest.Config, method, path string) (string, error) {
	t.Helper()
	q := url.Values{"command": {"tty"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}}
	u, err := url.Parse(apiURL(cfg, path+"?"+q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	var ex remotecommand.Executor
	if method == http.MethodGet {
		ex, err = remotecommand.NewWebSocketExecutor(cfg, method, u.String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(cfg, method, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	stdin, typing := io.Pipe()
	defer typing.Close()
	var out syncBuffer
	term := &sizes{next: make(chan remotecommand.TerminalSize, 1)}
	term.next <- remotecommand.TerminalSize{Width: 80, Height: 24}
	go func() {
		defer close(term.next)
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(out.String(), "size 80x24") {
				term.next <- remotecommand.TerminalSize{Width: 132, Height: 50}
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Tty: true, TerminalSizeQueue: term})
	return out.String(), err
}
