package relay

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// firstSizeWait bounds the wait for the client's first terminal size
// before the run starts: kubectl sends it as soon as the streams are up,
// and a command that reads its size at once (a shell, an editor) should
// find it, not 0x0. Past it the run starts anyway and the size follows as
// a resize.
const firstSizeWait = time.Second

// terminalBody is a TTY run's request body: the request line with the
// first size, then stdin and every later size as frames. It ends with
// stdin (or, without stdin, with the resizes or ctx).
func terminalBody(ctx context.Context, req agentapi.RunRequest, in io.Reader, resize <-chan remotecommand.TerminalSize) io.Reader {
	wait := time.NewTimer(firstSizeWait)
	defer wait.Stop()
	select {
	case s, ok := <-resize:
		if ok {
			req.Size = &agentapi.TerminalSize{Width: s.Width, Height: s.Height}
		}
	case <-wait.C:
	case <-ctx.Done():
	}
	pr, pw := io.Pipe()
	tw := agentapi.NewTerminalWriter(pw)
	go func() {
		if _, err := pw.Write(agentapi.WriteRunRequest(req)); err != nil {
			return
		}
		if in != nil {
			go forwardResizes(ctx, tw, resize)
			_, err := io.Copy(tw, in)
			pw.CloseWithError(err)
			return
		}
		forwardResizes(ctx, tw, resize)
		pw.Close()
	}()
	return pr
}

// forwardResizes sends each size as a resize frame until resize closes,
// ctx ends or the body does.
func forwardResizes(ctx context.Context, tw *agentapi.TerminalWriter, resize <-chan remotecommand.TerminalSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-resize:
			if !ok {
				return
			}
			if tw.Resize(agentapi.TerminalSize{Width: s.Width, Height: s.Height}) != nil {
				return
			}
		}
	}
}

// webSocketResizes decodes the WebSocket resize channel's sizes (JSON, as
// SPDY's resize stream carries them) until it ends.
func webSocketResizes(ctx context.Context, r io.Reader) <-chan remotecommand.TerminalSize {
	ch := make(chan remotecommand.TerminalSize)
	go func() {
		defer close(ch)
		dec := json.NewDecoder(r)
		for {
			var s remotecommand.TerminalSize
			if dec.Decode(&s) != nil {
				return
			}
			select {
			case ch <- s:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
