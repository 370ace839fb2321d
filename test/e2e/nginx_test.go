package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
	addr := freePort(t)
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
				t.Logf("nginx error log:\n%s", tail(string(b), 30))
			}
		}
	})
	eventually(t, "nginx answering", 10*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return addr
}

// load sends GETs from workers until stop is closed and at least min
// requests were sent; it counts answers by body and failures.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	bodies     map[string]int64
	firstErr   atomic.Value
}

func runLoad(addr string, workers int, min int64, stop <-chan struct{}) *load {
	l := &load{bodies: map[string]int64{}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Minute) // bounded, whatever happens
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				select {
				case <-stop:
					if l.ok.Load()+l.failed.Load() >= min {
						return
					}
				default:
				}
				resp, err := c.Get("http://" + addr + "/")
				if err != nil {
					l.fail(err)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					l.fail(fmt.Errorf("status %s: %v %s", resp.Status, err, b))
					continue
				}
				l.ok.Add(1)
				l.mu.Lock()
				l.bodies[string(b)]++
				l.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return l
}

func (l *load) fail(err error) {
	l.failed.Add(1)
	l.firstErr.CompareAndSwap(nil, err)
}
