package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// webSocketProtocols are the exec protocols served over WebSocket. The
// kubelet's ServeExec offers WebSocket only up to v4; client-go's
// WebSocket executor (kubectl's first choice) asks for v5, which adds
// closing stdin alone. The API server translates v5 to SPDY before the
// kubelet; an aggregated API gets the WebSocket itself, so the relay
// speaks v5 here (wsstream implements its close signal).
var webSocketProtocols = []string{"v5.channel.k8s.io", "v4.channel.k8s.io"}

// The channels of an exec, by number.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanError
	chanResize
)

// serveWebSocketExec runs ex over a WebSocket, as ServeExec does over SPDY:
// the streams asked for, then the outcome as a Status on the error channel.
func (s *Server) serveWebSocketExec(w http.ResponseWriter, r *http.Request, ex *runExecutor, cmd []string, opts *remotecommand.Options) {
	channels := make([]wsstream.ChannelType, 5)
	channels[chanStdin] = pick(opts.Stdin, wsstream.ReadChannel)
	channels[chanStdout] = pick(opts.Stdout, wsstream.WriteChannel)
	channels[chanStderr] = pick(opts.Stderr, wsstream.WriteChannel)
	channels[chanError] = wsstream.WriteChannel
	channels[chanResize] = pick(opts.TTY, wsstream.ReadChannel)
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for _, p := range webSocketProtocols {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(streamIdleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		s.Log.Info("exec: WebSocket not opened", "path", r.URL.Path, "error", err.Error())
		return
	}
	defer conn.Close()
	// An empty message on the first stream written tells the client the
	// streams are up.
	first := chanError
	if opts.Stdout {
		first = chanStdout
	} else if opts.Stderr {
		first = chanStderr
	}
	_, _ = streams[first].Write(nil)
	var in io.Reader
	var out, errOut io.WriteCloser
	if opts.Stdin {
		in = streams[chanStdin]
	}
	if opts.Stdout {
		out = streams[chanStdout]
	}
	if opts.Stderr {
		errOut = streams[chanStderr]
	}
	var resize <-chan remotecommand.TerminalSize
	if opts.TTY {
		resize = webSocketResizes(r.Context(), streams[chanResize])
	}
	runErr := ex.ExecInContainer(r.Context(), "", "", "", cmd, in, out, errOut, opts.TTY, resize, 0)
	b, _ := json.Marshal(execStatus(runErr))
	_, _ = streams[chanError].Write(b)
}

func pick(on bool, t wsstream.ChannelType) wsstream.ChannelType {
	if on {
		return t
	}
	return wsstream.IgnoreChannel
}

// execStatus is a run's outcome as the exec protocols (v4 and later)
// report it: Success, NonZeroExitCode with the code, or the error.
func execStatus(err error) metav1.Status {
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exit) && exit.Exited():
		return metav1.Status{
			Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exit.ExitStatus())},
			}},
		}
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status()
	}
	return apierrors.NewInternalError(err).Status()
}
