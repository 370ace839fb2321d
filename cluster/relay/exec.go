package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// streamIdleTimeout ends an exec stream nobody wrote to for so long, as
// the kubelet's --streaming-connection-idle-timeout does.
const streamIdleTimeout = 4 * time.Hour

// serveRun serves instances/run and instances/exec with pods/exec's
// query and streaming protocols (SPDY by cri-streaming's ServeExec,
// WebSocket v5 by serveWebSocketExec), bridged to the agent's framed run.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	u, ok := s.admit(w, r, "create", subRun, http.MethodPost, http.MethodGet)
	if !ok {
		return
	}
	opts, cmd, err := execOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	agent, err := s.Agents.For(r.Context(), ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	s.Log.Info("run", "namespace", ns, "name", name, "user", u.GetName(), "node", agent.node, "command", cmd, "stdin", opts.Stdin, "tty", opts.TTY)
	ex := &runExecutor{agent: agent, namespace: ns, name: name, user: u.GetName()}
	if wsstream.IsWebSocketRequest(r) {
		s.serveWebSocketExec(w, r, ex, cmd, opts)
		return
	}
	remotecommand.ServeExec(w, r, ex, name, "", "", cmd, opts, streamIdleTimeout,
		remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// execOptions reads pods/exec's query: command (repeated), stdin, stdout,
// stderr, tty.
func execOptions(v url.Values) (*remotecommand.Options, []string, error) {
	cmd := v["command"]
	if len(cmd) == 0 || cmd[0] == "" {
		return nil, nil, errors.New("no command: give it as command=ARG, once per argument")
	}
	var o remotecommand.Options
	for key, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		b, err := boolParam(v, key)
		if err != nil {
			return nil, nil, err
		}
		*dst = b
	}
	if o.TTY {
		// A terminal is one stream: its stderr is its stdout (as the
		// kubelet does, stderr is then not asked of the client).
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return nil, nil, errors.New("at least one of stdin, stdout or stderr must be true")
	}
	return &o, cmd, nil
}

// runExecutor runs one command through the agent.
type runExecutor struct {
	agent           *agentClient
	namespace, name string
	// user is who asked, for the agent's Event.
	user string
}

// ExecInContainer posts the run to the agent (stdin streamed after the
// request line; with a TTY, stdin and resizes as frames) and turns its
// frames into the streams and the exit code; a non-zero exit is the
// utilexec.ExitError ServeExec reports as "command terminated with exit
// code N".
func (e *runExecutor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	req := agentapi.RunRequest{Command: cmd, Stdin: in != nil, TTY: tty, RequestedBy: e.user}
	var body io.Reader
	switch {
	case tty:
		body = terminalBody(ctx, req, in, resize)
	case in != nil:
		body = io.MultiReader(bytes.NewReader(agentapi.WriteRunRequest(req)), in)
	default:
		body = bytes.NewReader(agentapi.WriteRunRequest(req))
	}
	resp, err := e.agent.do(ctx, http.MethodPost, agentapi.RunPath(e.namespace, e.name), "", body, subRun, e.name)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	code, err := copyFrames(resp.Body, writerOrDiscard(out), writerOrDiscard(errOut))
	if err != nil {
		return fmt.Errorf("the agent of node %s: %w", e.agent.node, err)
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// copyFrames writes a run's output frames to stdout and stderr and
// returns the exit code of its last frame.
func copyFrames(r io.Reader, stdout, stderr io.Writer) (int, error) {
	for {
		kind, b, err := agentapi.ReadFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("run stream ended before its exit: %w", err)
		}
		switch kind {
		case agentapi.FrameStdout:
			_, err = stdout.Write(b)
		case agentapi.FrameStderr:
			_, err = stderr.Write(b)
		case agentapi.FrameExit:
			var e agentapi.RunExit
			if err := json.Unmarshal(b, &e); err != nil {
				return 0, fmt.Errorf("run exit: %w", err)
			}
			if e.Message != "" {
				_, _ = fmt.Fprintf(stderr, "unitlet: %s: %s\n", e.Name, e.Message)
			}
			return e.ExitCode, nil
		case agentapi.FrameError:
			return 0, errors.New(string(b))
		default:
			return 0, fmt.Errorf("run stream: unknown frame kind %d", kind)
		}
		if err != nil {
			return 0, err
		}
	}
}
