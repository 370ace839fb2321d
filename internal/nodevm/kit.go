package nodevm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// MustRun runs a script in the guest, failing t when it fails; its
// output is trimmed.
func (v *VM) MustRun(t testing.TB, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := v.Run(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// Front starts nginx in the guest on port, in front of an Instance's
// stable socket, as a node's proxy would: its workers are www-data in
// the socket group, not root, and it never retries, so each failed
// connect counts. It is stopped at t's cleanup; it answers from this
// machine at 127.0.0.1:HostPort(port).
func (v *VM) Front(t testing.TB, socket, group string, port int) {
	t.Helper()
	conf := fmt.Sprintf(`daemon off;
user www-data %s;
worker_processes 2;
pid /run/test-nginx.pid;
error_log /run/test-nginx.err warn;
events { worker_connections 1024; }
http {
  access_log off;
  upstream app { server unix:%s; }
  server {
    listen %d;
    location / { proxy_pass http://app; proxy_next_upstream off; }
  }
}
`, group, socket, port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := v.WriteFile(ctx, "/etc/unitlet-test/nginx.conf", []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	v.MustRun(t, "systemd-run --unit=test-nginx --collect nginx -c /etc/unitlet-test/nginx.conf")
	t.Cleanup(func() { v.MustRun(t, "systemctl stop test-nginx || true") })
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", v.HostPort(port)))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx in the guest not answering: %v; its log: %s", err, v.MustRun(t, "cat /run/test-nginx.err || true"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}
