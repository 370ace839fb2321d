package testutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// UnixClient sends HTTP over the unix socket sock, dialling afresh for
// every request: each request follows a stable symlink as it is then.
func UnixClient(sock string) *http.Client { return DialClient("unix", sock, 5*time.Second) }

// DialClient sends every request to addr on network, whatever its URL's
// host, on a connection of its own, each within timeout.
func DialClient(network, addr string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// Get sends GET path through c and returns the body; an answer other than
// 200 is an error that still returns its body.
func Get(c *http.Client, path string) (string, error) {
	resp, err := c.Get("http://instance" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}

// UnixGet sends GET path over the unix socket sock.
func UnixGet(sock, path string) (string, error) { return Get(UnixClient(sock), path) }
