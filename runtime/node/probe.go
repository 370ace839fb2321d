package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
)

// DefaultProbeTimeout bounds a probe whose Readiness sets no Timeout.
const DefaultProbeTimeout = time.Second

// Probe checks once that generation ref answers on its own app socket
// (not the stable one, which may point at another generation): a connect,
// or an HTTP GET whose status is 2xx or 3xx.
func (n *Node) Probe(ctx context.Context, ref Ref, r Readiness) error {
	sock, err := n.appSocket(ref)
	if err != nil {
		return err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.HTTPPath == "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return fmt.Errorf("node: probe %s: %w", sock, err)
		}
		return c.Close()
	}
	return httpProbe(ctx, sock, r.HTTPPath)
}

// httpProbe sends one GET over the unix socket sock, on a connection of
// its own that is closed afterwards.
func httpProbe(ctx context.Context, sock, urlPath string) error {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	if urlPath == "" || urlPath[0] != '/' {
		urlPath = "/" + urlPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+urlPath, nil)
	if err != nil {
		return fmt.Errorf("node: probe %s: %w", urlPath, err)
	}
	resp, err := (&http.Client{Transport: tr, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		return fmt.Errorf("node: probe %s%s: %w", sock, urlPath, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("node: probe %s%s: status %d", sock, urlPath, resp.StatusCode)
	}
	return nil
}

// noRedirect keeps a 3xx as the answer: it counts as ready, and its
// target may not even be on this socket.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// appSocket is generation ref's own app socket.
func (n *Node) appSocket(ref Ref) (string, error) {
	if ref.Role != layout.RoleApp || ref.Generation == 0 {
		return "", fmt.Errorf("%w: %s %d", ErrNotAGeneration, ref.Role, ref.Generation)
	}
	li, err := n.layoutOf(ref.InstanceRef)
	if err != nil {
		return "", err
	}
	sock, err := li.AppSocket(ref.Generation)
	if err != nil {
		return "", fmt.Errorf("node: %w", err)
	}
	return sock, nil
}
