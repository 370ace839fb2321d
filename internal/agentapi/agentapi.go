// Package agentapi is the wire between the relay and a node's agent: the
// paths and parameters of the agent's two endpoints, the frames a run
// streams each way, and the names the two sides' certificates are for.
// Both sides import it, so neither spells a path or a frame on its own.
package agentapi

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// DefaultPort is where an agent serves when no --serve-address says
// otherwise (the kubelet's 10250 plus ten).
const DefaultPort = 10260

// RelayClientName is the CommonName of the relay's client certificate:
// the one caller an agent serves, verified against the relay CA.
const RelayClientName = "unitlet-relay"

// ServerName is the DNS name an agent's self-signed serving certificate
// is issued for; the relay verifies against that name and the CA the
// agent published in its Enrollment, whatever address it dials.
func ServerName(node string) string { return node + ".agent.unitlet.dev" }

// Resources the authorizer is asked about: verb get on instances/log,
// verb create on instances/run, as the kubelet asks about nodes/log and
// pods/exec.
const (
	ResourceInstances = "instances"
	SubresourceLog    = "log"
	SubresourceRun    = "run"
)

// LogPath and RunPath are the two endpoints for an Instance.
func LogPath(namespace, name string) string { return instancePath(namespace, name) + "/log" }
func RunPath(namespace, name string) string { return instancePath(namespace, name) + "/run" }

func instancePath(namespace, name string) string {
	return "/v1/namespaces/" + url.PathEscape(namespace) + "/instances/" + url.PathEscape(name)
}

// ParsePath splits a request path into its Instance and subresource.
func ParsePath(p string) (namespace, name, sub string, err error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 6 || parts[0] != "v1" || parts[1] != "namespaces" || parts[3] != "instances" {
		return "", "", "", fmt.Errorf("no such path %q: want /v1/namespaces/NS/instances/NAME/{log,run}", p)
	}
	if parts[2] == "" || parts[4] == "" {
		return "", "", "", fmt.Errorf("path %q names no Instance", p)
	}
	return parts[2], parts[4], parts[5], nil
}

// LogQuery is what `logs` asks for.
type LogQuery struct {
	Follow bool
	// Since is an RFC 3339 time or a duration back from now ("5m").
	Since string
	// Generation picks one generation's lines (0: every generation).
	Generation int64
	// Role is run (the default), seed or sidecar/NAME.
	Role string
	// TailLines keeps only the last N of the selected lines (0: all).
	TailLines int64
	// LimitBytes stops the response after N bytes (0: no limit).
	LimitBytes int64
}

// Encode is the query string.
func (q LogQuery) Encode() string {
	v := url.Values{}
	if q.Follow {
		v.Set("follow", "true")
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Generation != 0 {
		v.Set("generation", strconv.FormatInt(q.Generation, 10))
	}
	if q.Role != "" {
		v.Set("role", q.Role)
	}
	if q.TailLines != 0 {
		v.Set("tailLines", strconv.FormatInt(q.TailLines, 10))
	}
	if q.LimitBytes != 0 {
		v.Set("limitBytes", strconv.FormatInt(q.LimitBytes, 10))
	}
	return v.Encode()
}

// ParseLogQuery is the inverse of Encode.
func ParseLogQuery(v url.Values) (LogQuery, error) {
	q := LogQuery{Since: v.Get("since"), Role: v.Get("role")}
	if f := v.Get("follow"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			return q, fmt.Errorf("follow=%q: %w", f, err)
		}
		q.Follow = b
	}
	if g := v.Get("generation"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil || n <= 0 {
			return q, fmt.Errorf("generation=%q: want a generation number (1, 2, ...)", g)
		}
		q.Generation = n
	}
	for key, dst := range map[string]*int64{"tailLines": &q.TailLines, "limitBytes": &q.LimitBytes} {
		s := v.Get(key)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return q, fmt.Errorf("%s=%q: want a positive number", key, s)
		}
		*dst = n
	}
	return q, nil
}

// RunRequest starts the body of a run: one line of JSON. With Stdin,
// the rest of the body is the command's stdin, streamed while it runs
// (the request and the response go at once); without, its stdin is
// empty. With TTY the rest of the body is frames instead (stdin and
// resizes: ReadTerminalInput), and the command's terminal output comes
// back as stdout frames alone.
type RunRequest struct {
	// Command is argv; its first word is looked up as the app's own
	// command is (an absolute path, or relative to the working dir).
	Command []string `json:"command"`
	Stdin   bool     `json:"stdin,omitempty"`
	// TTY runs the command on a terminal of its own, Size its first
	// size (zero: the terminal's default, 0x0, until a resize).
	TTY  bool          `json:"tty,omitempty"`
	Size *TerminalSize `json:"size,omitempty"`
	// RequestedBy is the user the relay authenticated and authorized,
	// for the run's Event: the agent sees only the relay, and records
	// whom it vouched for (it decides nothing on it).
	RequestedBy string `json:"requestedBy,omitempty"`
}

// MaxRunRequest bounds the JSON line.
const MaxRunRequest = 1 << 20

// WriteRunRequest is the start of a run's body.
func WriteRunRequest(req RunRequest) []byte {
	b, _ := json.Marshal(req)
	return append(b, '\n')
}

// ReadRunRequest reads the JSON line from r (buffered: the command's
// stdin, if any, follows in r).
func ReadRunRequest(r *bufio.Reader) (RunRequest, error) {
	var req RunRequest
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return req, fmt.Errorf("run request: its first line exceeds %d bytes", r.Size())
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return req, fmt.Errorf("run request: %w", err)
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("run request: %w", err)
	}
	return req, nil
}

// RunExit is the last frame of a run.
type RunExit struct {
	// Name is the run's own name (its unit and cgroup carry it).
	Name string `json:"name"`
	// Generation is the generation whose environment it ran in.
	Generation int64 `json:"generation"`
	// ExitCode is the command's exit status, or 128+N after signal N, as
	// a shell reports it.
	ExitCode int `json:"exitCode"`
	// Message says what ended it when the command did not exit by itself.
	Message string `json:"message,omitempty"`
}

// A run's response (and a TTY run's request, after its first line) is a
// sequence of frames: a kind byte, a 4-byte
// big-endian length, that many bytes. Exit (JSON RunExit) or Error (a
// message) is always last.
type FrameKind byte

const (
	FrameStdout FrameKind = 1
	FrameStderr FrameKind = 2
	FrameExit   FrameKind = 3
	FrameError  FrameKind = 4
	// Upstream, in a TTY run's request body (terminal.go).
	FrameStdin  FrameKind = 5
	FrameResize FrameKind = 6
)

// MaxFrame bounds one frame: a writer cuts longer output into several.
const MaxFrame = 1 << 20

// RunContentType marks a framed run stream.
const RunContentType = "application/vnd.unitlet.run-frames"

// WriteFrame writes one frame (payload at most MaxFrame bytes).
func WriteFrame(w io.Writer, k FrameKind, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(payload), MaxFrame)
	}
	var h [5]byte
	h[0] = byte(k)
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ErrFrameTooLarge is a frame header over MaxFrame: not this protocol.
var ErrFrameTooLarge = errors.New("agentapi: frame too large")

// ReadFrame reads one frame; io.EOF only at a frame boundary.
func ReadFrame(r io.Reader) (FrameKind, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, fmt.Errorf("agentapi: frame cut short: %w", io.ErrUnexpectedEOF)
	}
	return FrameKind(h[0]), b, nil
}
