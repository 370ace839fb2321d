package endpoint

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// serveRun runs the command in the active generation's environment and
// streams its output back in frames, then its exit. The caller going
// away stops it; either way it ends proven gone, recorded by an Event
// on the Instance and a metric.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request, ns, name string) {
	body := bufio.NewReaderSize(r.Body, agentapi.MaxRunRequest)
	req, err := agentapi.ReadRunRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		http.Error(w, "run request: no command", http.StatusBadRequest)
		return
	}
	inst, ok := s.instance(w, r, ns, name)
	if !ok {
		return
	}
	gen := inst.Status.ActiveGeneration
	if gen <= 0 || inst.Spec.Suspend || !inst.DeletionTimestamp.IsZero() {
		http.Error(w, fmt.Sprintf("Instance %s/%s has no active generation to run in (suspended, deleted or not started yet)", ns, name), http.StatusConflict)
		return
	}
	runName := newRunName()
	var stdin io.Reader
	var resize <-chan terminal.Size
	switch {
	case req.TTY:
		stdin, resize = terminalInput(r, body, req.Stdin)
	case req.Stdin:
		stdin = body
	}
	if req.Stdin || req.TTY {
		// HTTP/1.1 reads the rest of the body while the answer goes out
		// only when asked; HTTP/2 always does.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	w.Header().Set("Content-Type", agentapi.RunContentType)
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, rc: http.NewResponseController(w)}
	began := time.Now()
	res := s.Node.Run(r.Context(), node.RunRequest{
		InstanceRef: node.InstanceRef{Namespace: ns, Name: name}, Name: runName, Generation: gen,
		Argv: req.Command, Grace: s.Grace, Stdin: stdin,
		TTY: req.TTY, Size: terminalSize(req.Size), Resize: resize,
		// A run is a new start: as a named user, only while granted.
		Grant: func(user string) (identity.Grant, error) {
			return controllers.ReadGrant(r.Context(), s.Client, ns, user, s.NodeName)
		},
		Stdout: fw.stream(agentapi.FrameStdout), Stderr: fw.stream(agentapi.FrameStderr),
	})
	took := time.Since(began)
	end := runEnd(res, runName, gen)
	metrics.ObserveRun(end.result, took)
	s.Log.Info("run ended", "namespace", ns, "name", name, "run", runName,
		"command", req.Command, "result", end.result, "exitCode", end.exit.ExitCode, "took", took)
	// Who asked is whom the relay vouched for (the agent sees only the
	// relay); the API server's audit log has the request itself.
	s.Recorder.Eventf(inst, nil, end.eventType, end.reason, "Run", "%s ran %s (%s, generation %d) through the relay: %s after %s",
		requester(req.RequestedBy), quoteCommand(req.Command), runName, gen, end.summary, took.Round(time.Millisecond))
	if end.failed != "" {
		_ = fw.frame(agentapi.FrameError, []byte(end.failed))
		return
	}
	b, _ := json.Marshal(end.exit)
	_ = fw.frame(agentapi.FrameExit, b)
}

// terminalInput splits a TTY run's request frames into what is typed
// (nil without stdin: the command's terminal gets no input) and resizes,
// read until the body ends or the request does.
func terminalInput(r *http.Request, body io.Reader, withStdin bool) (io.Reader, <-chan terminal.Size) {
	resize := make(chan terminal.Size)
	pr, pw := io.Pipe()
	var typed io.Writer = pw
	if !withStdin {
		typed = io.Discard
	}
	go func() {
		err := agentapi.ReadTerminalInput(body, typed, func(s agentapi.TerminalSize) {
			select {
			case resize <- terminalSize(&s):
			case <-r.Context().Done():
			}
		})
		pw.CloseWithError(err) // nil: stdin's end
		close(resize)
	}()
	if !withStdin {
		return nil, resize
	}
	return pr, resize
}

// terminalSize is the node's terminal.Size of a request's (nil: 0x0).
func terminalSize(s *agentapi.TerminalSize) terminal.Size {
	if s == nil {
		return terminal.Size{}
	}
	return terminal.Size{Rows: s.Height, Cols: s.Width}
}

// runOutcome is what a finished run reports, records and counts.
type runOutcome struct {
	exit              agentapi.RunExit
	result            string // the metric's label
	eventType, reason string
	summary           string
	failed            string // set: an error frame instead of an exit
}

// runEnd decides the outcome from what the node proved.
func runEnd(res node.RunResult, runName string, gen int64) runOutcome {
	o := runOutcome{exit: agentapi.RunExit{Name: runName, Generation: gen}, eventType: corev1.EventTypeNormal}
	switch {
	case res.Start.Kind == outcome.NotStarted:
		o.result, o.eventType, o.reason = "notStarted", corev1.EventTypeWarning, "RunNotStarted"
		o.summary = "not started: " + errString(res.Start.Cause)
		o.failed = "run not started: " + errString(res.Start.Cause)
	case !res.Kill.Proven:
		o.result, o.eventType, o.reason = "unproven", corev1.EventTypeWarning, v1.ConditionKillUnproven
		o.summary = "its end is not proven: " + errString(res.Kill.Err())
		o.failed = o.summary
	case res.Stopped:
		o.result, o.eventType, o.reason = "interrupted", corev1.EventTypeWarning, "RunInterrupted"
		o.summary = "its caller's stream ended (the caller went away, or the agent stopped); stopped and proven gone"
		o.exit.ExitCode, o.exit.Message = 130, o.summary
	case res.Exit == nil:
		o.result, o.eventType, o.reason = "failed", corev1.EventTypeWarning, "RunFailed"
		o.summary = "ended with no exit record"
		o.exit.ExitCode, o.exit.Message = 1, o.summary
	default:
		o.exit.ExitCode = exitCode(*res.Exit)
		o.summary = fmt.Sprintf("exit code %d", o.exit.ExitCode)
		o.result, o.reason = "succeeded", "RunSucceeded"
		if o.exit.ExitCode != 0 {
			o.result, o.eventType, o.reason = "failed", corev1.EventTypeWarning, "RunFailed"
		}
	}
	return o
}

// exitCode is the status a shell would report: the code, or 128+signal.
func exitCode(e outcome.Exit) int {
	if e.Signal != 0 {
		return 128 + e.Signal
	}
	return e.Code
}

func errString(err error) string {
	if err == nil {
		return "unknown cause"
	}
	return err.Error()
}

// quoteCommand is argv for an Event's note, bounded (a note is at most
// 1 kB).
func quoteCommand(argv []string) string {
	b, _ := json.Marshal(argv)
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// newRunName is run-<8 hex>: unique enough among one Instance's runs, and
// a DNS label within layout.RunNameMax.
func newRunName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// instance reads the Instance from the agent's cache (this node's only);
// a miss answers 404.
func (s *Server) instance(w http.ResponseWriter, r *http.Request, ns, name string) (*v1.Instance, bool) {
	var inst v1.Instance
	err := s.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &inst)
	if apierrors.IsNotFound(err) || (err == nil && inst.Spec.NodeName != s.NodeName) {
		http.Error(w, fmt.Sprintf("Instance %s/%s is not on node %s", ns, name, s.NodeName), http.StatusNotFound)
		return nil, false
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, false
	}
	return &inst, true
}

// frameWriter writes frames from the run's two streams, one at a time,
// each flushed at once: output reaches the caller as it is written.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
	rc *http.ResponseController
}

func (f *frameWriter) frame(k agentapi.FrameKind, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := agentapi.WriteFrame(f.w, k, b); err != nil {
		return err
	}
	return f.rc.Flush()
}

// stream is an io.Writer of one kind of frame, cutting at MaxFrame.
func (f *frameWriter) stream(k agentapi.FrameKind) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		for rest := p; len(rest) > 0; {
			n := min(len(rest), agentapi.MaxFrame)
			if err := f.frame(k, rest[:n]); err != nil {
				return len(p) - len(rest), err
			}
			rest = rest[n:]
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// requester names who asked for a run, as the relay said.
func requester(user string) string {
	if user == "" {
		return "someone the relay did not name"
	}
	return user
}
