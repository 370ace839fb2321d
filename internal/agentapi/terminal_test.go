package agentapi

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTerminalInput: what TerminalWriter frames, ReadTerminalInput takes
// apart again in order; anything else in the body is refused.
func TestTerminalInput(t *testing.T) {
	type event struct {
		Stdin  string
		Resize *TerminalSize
	}
	tests := map[string]struct {
		events  []event
		raw     []byte // appended after the events
		wantErr string
	}{
		"nothing": {},
		"stdin and resizes interleaved": {
			events: []event{{Stdin: "ls\r"}, {Resize: &TerminalSize{Width: 80, Height: 24}}, {Stdin: "exit\r"}, {Resize: &TerminalSize{Width: 132, Height: 50}}},
		},
		"stdin longer than a frame": {
			events: []event{{Stdin: strings.Repeat("x", MaxFrame+3)}},
		},
		"an output frame upstream": {
			events: []event{{Stdin: "a"}}, raw: []byte{byte(FrameStdout), 0, 0, 0, 1, 'b'}, wantErr: "unexpected frame kind 1",
		},
		"a malformed resize": {
			raw: []byte{byte(FrameResize), 0, 0, 0, 2, '{', 'x'}, wantErr: "resize",
		},
		"a cut frame": {
			raw: []byte{byte(FrameStdin), 0, 0, 0, 5, 'a'}, wantErr: "cut short",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var body bytes.Buffer
			tw := NewTerminalWriter(&body)
			for _, e := range tc.events {
				if e.Resize != nil {
					if err := tw.Resize(*e.Resize); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if _, err := tw.Write([]byte(e.Stdin)); err != nil {
					t.Fatal(err)
				}
			}
			body.Write(tc.raw)
			var got []event
			stdin := writerFunc(func(p []byte) (int, error) {
				if n := len(got); n > 0 && got[n-1].Resize == nil {
					got[n-1].Stdin += string(p) // one write cut in frames
				} else {
					got = append(got, event{Stdin: string(p)})
				}
				return len(p), nil
			})
			err := ReadTerminalInput(&body, stdin, func(s TerminalSize) { got = append(got, event{Resize: &s}) })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("ReadTerminalInput: %v, want an error with %q", err, tc.wantErr)
			}
			// What came before a bad frame went through.
			if d := cmp.Diff(tc.events, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRunRequestTerminal: a TTY request's line carries the terminal and
// its size; one without leaves both out, as before.
func TestRunRequestTerminal(t *testing.T) {
	tests := map[string]struct {
		req      RunRequest
		wantLine string
	}{
		"no terminal": {
			req:      RunRequest{Command: []string{"/bin/true"}},
			wantLine: `{"command":["/bin/true"]}`,
		},
		"terminal with a size": {
			req:      RunRequest{Command: []string{"/bin/sh"}, Stdin: true, TTY: true, Size: &TerminalSize{Width: 80, Height: 24}},
			wantLine: `{"command":["/bin/sh"],"stdin":true,"tty":true,"size":{"width":80,"height":24}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			line := WriteRunRequest(tc.req)
			if d := cmp.Diff(tc.wantLine+"\n", string(line)); d != "" {
				t.Errorf("line (-want,+got):\n%s", d)
			}
			got, err := ReadRunRequest(bufio.NewReader(bytes.NewReader(line)))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.req, got); d != "" {
				t.Errorf("read back (-want,+got):\n%s", d)
			}
		})
	}
}
