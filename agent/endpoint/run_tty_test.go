package endpoint

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
	"github.com/unitlet/unitlet/runtime/terminal"
)

// ttyNode is a node whose run says what it was given: its terminal, its
// first size, what was typed and each resize, once the request's input
// ended.
type ttyNode struct{ logOnly }

func (n *ttyNode) Run(_ context.Context, req node.RunRequest) node.RunResult {
	var sizes []terminal.Size
	resized := make(chan struct{})
	go func() {
		defer close(resized)
		for s := range req.Resize { // closed once the request's input ended
			sizes = append(sizes, s)
		}
	}()
	var typed []byte
	if req.Stdin != nil {
		typed, _ = io.ReadAll(req.Stdin)
	}
	<-resized
	fmt.Fprintf(req.Stdout, "tty=%v size=%v typed=%q resizes=%v", req.TTY, req.Size, typed, sizes)
	return node.RunResult{Start: outcome.Start{Kind: outcome.Running}, Kill: outcome.Kill{Proven: true},
		Exit: &outcome.Exit{Code: 5}}
}

// TestRunTerminal: a TTY run's request line and frames reach the node as
// a terminal, its first size, typed input and resizes; its output and
// exit come back as frames.
func TestRunTerminal(t *testing.T) {
	ca := issue(t, "unitlet-relay-ca", nil, nil)
	relay := issue(t, agentapi.RelayClientName, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ca)
	ep, _ := startServer(t, ca, &ttyNode{})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ep.CABundle)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: ep.ServerName, Certificates: []tls.Certificate{relay.tls()}, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	tests := map[string]struct {
		req     agentapi.RunRequest
		typed   string
		resizes []agentapi.TerminalSize
		wantOut string
	}{
		"typed and resized": {
			req:   agentapi.RunRequest{Command: []string{"/bin/sh"}, Stdin: true, TTY: true, Size: &agentapi.TerminalSize{Width: 80, Height: 24}},
			typed: "ls\r", resizes: []agentapi.TerminalSize{{Width: 132, Height: 50}},
			wantOut: `tty=true size={24 80} typed="ls\r" resizes=[{50 132}]`,
		},
		"no stdin, no size": {
			req:     agentapi.RunRequest{Command: []string{"/bin/top"}, TTY: true},
			resizes: []agentapi.TerminalSize{{Width: 100, Height: 30}},
			wantOut: `tty=true size={0 0} typed="" resizes=[{30 100}]`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body := bytes.NewBuffer(agentapi.WriteRunRequest(tc.req))
			tw := agentapi.NewTerminalWriter(body)
			if tc.typed != "" {
				_, _ = tw.Write([]byte(tc.typed))
			}
			for _, s := range tc.resizes {
				_ = tw.Resize(s)
			}
			resp, err := hc.Post("https://"+ep.Address+agentapi.RunPath("default", "active"), "application/octet-stream", body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out bytes.Buffer
			var exit agentapi.RunExit
			for {
				kind, b, err := agentapi.ReadFrame(resp.Body)
				if err != nil {
					t.Fatalf("status %d, frames: %v (output so far %q)", resp.StatusCode, err, out.String())
				}
				if kind == agentapi.FrameExit {
					_ = json.Unmarshal(b, &exit)
					break
				}
				if kind != agentapi.FrameStdout {
					t.Fatalf("frame %d %q, want stdout", kind, b)
				}
				out.Write(b)
			}
			if d := cmp.Diff(tc.wantOut, out.String()); d != "" {
				t.Errorf("output (-want,+got):\n%s", d)
			}
			if exit.ExitCode != 5 {
				t.Errorf("exit code %d, want 5", exit.ExitCode)
			}
		})
	}
}
