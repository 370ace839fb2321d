package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// proxyGroup is the group the e2e agents give the Instances' run dirs and
// sockets (--socket-group), and nginx's workers run in: a front end
// reaches the apps through that group, not as root.
const proxyGroup = "www-data"

// startNginx proxies 127.0.0.1:<port> to an Instance's stable socket, as a
// front end would; no retries, so every failed upstream connect counts.
// Its workers run as the user and group proxyGroup names.
func startNginx(t *testing.T, socket string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/sbin/nginx"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatal("nginx not installed: run hack/deps.sh (make test does)")
	}
	if _, err := user.LookupGroup(proxyGroup); err != nil {
		t.Fatalf("the proxy's group %s: %v", proxyGroup, err)
	}
	dir := t.TempDir()
	addr := testutil.FreePort(t)
	conf := fmt.Sprintf(`daemon off;
user %[4]s %[4]s;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi; uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream app { server unix:%[2]s; }
  server {
    listen %[3]s;
    location / { proxy_pass http://app; proxy_next_upstream off; }
  }
}
`, dir, socket, addr, proxyGroup)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "error.log")); err == nil {
				t.Logf("nginx error log:\n%s", testutil.Tail(string(b), 30))
			}
		}
	})
	testutil.Eventually(t, "nginx answering", 10*time.Second, pollEvery, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return addr
}
