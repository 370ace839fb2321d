package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// guest runs a script in the guest, failing t when it fails.
func guest(t testing.TB, script string) string { t.Helper(); return vm.MustRun(t, script) }

func eventually(t testing.TB, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, what, limit, pollEvery, cond)
}

// readyz is the agent's /readyz status code through the forwarded port,
// or 0 while nothing answers.
func readyz() int { return probe("/readyz") }

// probe is the status code of one of the agent's probe paths.
func probe(path string) int {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", vm.HostPort(probePort), path))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// units lists the guest's loaded unitlet units, slices included (the
// agent's own service aside).
func units(t testing.TB) []string {
	t.Helper()
	out := guest(t, "systemctl list-units --all --plain --no-legend 'unitlet-*' | grep -v '^"+agentService+" ' | awk '{print $1\" \"$3\"/\"$4}' || true")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// unixGet asks the app behind a socket in the guest for path.
func unixGet(t testing.TB, sock, path string) string {
	t.Helper()
	return guest(t, fmt.Sprintf(`python3 - <<'EOF'
import http.client, socket
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(%q)
c = C("app"); c.request("GET", %q); print(c.getresponse().read().decode(), end="")
EOF`, sock, path))
}

// hold is a process the agent cannot kill, in a cgroup of the guest: it
// writes to a frozen file system, so it sleeps uninterruptibly and takes
// SIGKILL (systemd's, cgroup.kill's) only once the file system thaws.
// Nothing is faked: the kernel keeps the cgroup populated.
type hold struct{ cgroup string }

func holdIn(t testing.TB, cgroup string) *hold {
	t.Helper()
	// The cgroup's path holds systemd's \x2d escapes: quoted once, used
	// as "$cg" (unquoted, the shell would read \x2d as x2d).
	guest(t, `set -e
cg='/sys/fs/cgroup`+cgroup+`'
mkdir -p /mnt/hold
if ! mountpoint -q /mnt/hold; then
  truncate -s 32M /root/hold.img && mkfs.ext4 -q -F /root/hold.img && mount -o loop /root/hold.img /mnt/hold
fi
fsfreeze -f /mnt/hold
# The writer moves itself into the cgroup first, then blocks in the write.
cg="$cg" setsid sh -c 'echo $$ > "$cg/cgroup.procs" && exec dd if=/dev/zero of=/mnt/hold/x bs=4k count=1 conv=fsync status=none' </dev/null >/dev/null 2>&1 &
for i in $(seq 50); do
  for p in $(cat "$cg/cgroup.procs"); do
    [ "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" = D ] && exit 0
  done
  sleep 0.1
done
echo "no process of `+cgroup+` in D state" >&2; exit 1`)
	h := &hold{cgroup: cgroup}
	t.Cleanup(func() { h.release(t) })
	return h
}

// release thaws the file system: the held process dies of the SIGKILL it
// was sent.
func (h *hold) release(t testing.TB) {
	t.Helper()
	guest(t, "fsfreeze -u /mnt/hold 2>/dev/null || true")
}

// guestLayout is where the agent in the guest keeps Instance name: the
// DaemonSet's roots.
func guestLayout(t testing.TB, name string) layout.Instance {
	t.Helper()
	lay := layout.Layout{}
	for _, a := range agent.Args {
		if v, ok := strings.CutPrefix(a, "--state-root="); ok {
			lay.StateRoot = v
		} else if v, ok := strings.CutPrefix(a, "--run-root="); ok {
			lay.RunRoot = v
		} else if v, ok := strings.CutPrefix(a, "--cgroup-root="); ok {
			lay.CgroupRoot = v
		}
	}
	li, err := lay.Instance(testutil.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return li
}
