package nodevm

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/unitlet/unitlet/runtime/layout"
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
	v.FrontAll(t, []string{socket}, group, port)
}

// FrontAll is Front before several Instances' sockets, taken in turn
// (round robin). No socket is ever set aside after a failure
// (max_fails=0): each request goes to the next socket, whatever the last
// one did.
func (v *VM) FrontAll(t testing.TB, sockets []string, group string, port int) {
	t.Helper()
	var upstream strings.Builder
	for _, s := range sockets {
		fmt.Fprintf(&upstream, " server unix:%s max_fails=0;", s)
	}
	conf := fmt.Sprintf(`daemon off;
user www-data %s;
worker_processes 2;
pid /run/test-nginx.pid;
error_log /run/test-nginx.err warn;
events { worker_connections 1024; }
http {
  access_log off;
  upstream app {%s }
  server {
    listen %d;
    location / { proxy_pass http://app; proxy_next_upstream off; }
  }
}
`, group, upstream.String(), port)
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

// GuestKubeconfig rewrites a kubeconfig made for this machine's loopback
// to reach the same API server from inside the guest. serverName, when
// set, is the name the serving certificate is checked against (envtest's
// names only localhost); "" keeps the certificate's check on the address.
func GuestKubeconfig(kc []byte, serverName string) ([]byte, error) {
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = strings.Replace(c.Server, "127.0.0.1", GuestHostAddr, 1)
		c.Server = strings.Replace(c.Server, "localhost", GuestHostAddr, 1)
		c.TLSServerName = serverName
	}
	return clientcmd.Write(*cfg)
}

// NodeLayout is the agent's layout on the node: the DaemonSet's defaults.
var NodeLayout = layout.Layout{StateRoot: "/var/lib/unitlet", RunRoot: "/run/unitlet", CgroupRoot: "unitlet"}

// Leftovers lists what is left in the guest of Instances with the
// DaemonSet's roots (every Instance of namespace when name is ""): units,
// cgroups, run, data and private directories. Empty once a delete is
// complete.
func (v *VM) Leftovers(t testing.TB, namespace, name string) map[string]string {
	t.Helper()
	lay := NodeLayout
	probe := name
	if probe == "" {
		probe = "x" // any Instance of the namespace: its parents are the namespace's
	}
	li, err := lay.Instance(namespace, probe)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{li.RunDir(), li.DataDir(), li.PrivateDir()}
	prefix := strings.TrimSuffix(li.SliceName(), ".slice")               // its units' and slice's
	dirs := "ls -d " + strings.Join(paths, " ") + " 2>/dev/null || true" // they exist
	if name == "" {
		// The namespace's own slice (unitlet-<ns>.slice) is the platform's
		// and stays; its Instances' names follow its prefix.
		for i := range paths {
			paths[i] = filepath.Dir(paths[i])
		}
		prefix = strings.TrimSuffix(prefix, probe)
		dirs = "find " + strings.Join(paths, " ") + " -mindepth 1 -maxdepth 1 2>/dev/null || true" // they hold anything
	}
	left := map[string]string{}
	for what, script := range map[string]string{
		"units":   "systemctl list-units --all --plain --no-legend '" + prefix + "*' || true",
		"cgroups": "find /sys/fs/cgroup -name '" + prefix + "*' -type d",
		"dirs":    dirs,
	} {
		if out := v.MustRun(t, script); out != "" {
			left[what] = out
		}
	}
	return left
}

// CPUSpent says where the guest's CPU went since its last boot (a
// reboot starts the count again): the whole guest's busy time
// (/proc/stat), then the cgroups that used the most (two levels deep,
// exited processes included), busiest first. One ssh command: cheap
// enough to print at a suite's end.
func (v *VM) CPUSpent(ctx context.Context) (string, error) {
	return v.Run(ctx, `awk '/^cpu / {printf "the guest, busy since its last boot: %.1f s (user %.1f, system %.1f, softirq %.1f)\n", ($2+$3+$4+$7+$8)/100, ($2+$3)/100, $4/100, $8/100}' /proc/stat
cd /sys/fs/cgroup && for f in */cpu.stat */*/cpu.stat; do
	awk -v d="${f%/cpu.stat}" '/^usage_usec/ {printf "%8.1f s  %s\n", $2/1e6, d}' "$f"
done | sort -rn | head -25`)
}

// ProcEnv reads variable name in the environment of each of pids in the
// guest, in one command. A process gone meanwhile (or a zombie, whose
// environment reads empty) is left out; one without the variable maps
// to "".
func (v *VM) ProcEnv(t testing.TB, pids []int, name string) map[int]string {
	t.Helper()
	var script strings.Builder
	for _, pid := range pids {
		fmt.Fprintf(&script, "if e=$(tr '\\0' '\\n' 2>/dev/null </proc/%d/environ) && [ -n \"$e\" ]; then "+
			"printf '%%s %%s\\n' %d \"$(printf '%%s\\n' \"$e\" | sed -n 's/^%s=//p')\"; fi\n", pid, pid, name)
	}
	env := map[int]string{}
	if len(pids) == 0 {
		return env
	}
	for _, line := range strings.Split(v.MustRun(t, script.String()), "\n") {
		pid, value, _ := strings.Cut(line, " ")
		if n, err := strconv.Atoi(pid); err == nil {
			env[n] = value
		}
	}
	return env
}
