package agentapi

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPathsParseBack(t *testing.T) {
	for _, p := range []string{LogPath("shop", "web.v2"), RunPath("a-b", "c")} {
		ns, name, sub, err := ParsePath(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := instancePath(ns, name) + "/" + sub; got != p {
			t.Errorf("%s parses back to %s", p, got)
		}
	}
	for _, bad := range []string{"/", "/v1/namespaces/x/pods/y/log", "/v1/namespaces//instances/y/log", "/v2/namespaces/x/instances/y/log", "/v1/namespaces/x/instances/y/log/more"} {
		if _, _, _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
}

func TestLogQueryRoundTrip(t *testing.T) {
	tests := map[string]LogQuery{
		"none":       {},
		"everything": {Follow: true, Since: "10m", Generation: 7, Role: "sidecar/cache", TailLines: 20, LimitBytes: 4096},
	}
	for name, q := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := url.ParseQuery(q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseLogQuery(v)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(q, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
	for _, bad := range []string{"follow=maybe", "generation=0", "generation=x", "tailLines=-1", "limitBytes=x"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseLogQuery(v); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestFrames(t *testing.T) {
	var b bytes.Buffer
	frames := []struct {
		Kind FrameKind
		Data string
	}{{FrameStdout, "out"}, {FrameStderr, ""}, {FrameExit, `{"exitCode":3}`}}
	for _, f := range frames {
		if err := WriteFrame(&b, f.Kind, []byte(f.Data)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range frames {
		k, data, err := ReadFrame(&b)
		if err != nil || k != want.Kind || string(data) != want.Data {
			t.Errorf("ReadFrame = %d %q %v, want %d %q", k, data, err, want.Kind, want.Data)
		}
	}
	if _, _, err := ReadFrame(&b); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	if err := WriteFrame(&b, FrameStdout, make([]byte, MaxFrame+1)); err == nil {
		t.Error("a frame over MaxFrame was written")
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{1, 0xff, 0, 0, 0})); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized header: %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{1, 0, 0, 0, 5, 'a'})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut frame: %v", err)
	}
}
