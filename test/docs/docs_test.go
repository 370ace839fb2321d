package docs

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// The documents whose blocks run, in order, each in a bash of its own
// that starts with nothing: each starts its own `make run` (an
// `sh background` block), as its reader would, and the harness stops it
// and runs `make dev-down` before the next, so a guide never leans on
// what the README's quick start left behind.
var documents = []struct {
	path, section string
}{
	{path: "README.md", section: "## Quick start"},
	{path: "docs/app-developer-guide.md"},
}

// fileTimeout bounds one document: a cold `make run` builds
// kube-apiserver and etcd from source (about 5 minutes).
const fileTimeout = 20 * time.Minute

// devAPIPort is hack/dev.sh's kube-apiserver port (DEV_API_PORT).
const devAPIPort = "16443"

func TestDocs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("docs: must run as root (make run's agent creates cgroups)")
	}
	root := testenv.RepoRoot()
	r := Runner{Dir: root, Env: blockEnv(root), Grace: 40 * time.Second}
	if testing.Verbose() {
		r.Live = os.Stdout
	}
	for _, d := range documents {
		t.Run(d.path, func(t *testing.T) {
			if err := refuseRunningDev(root); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { devDown(t, root) })
			f, err := readFile(root, d.path, d.section)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
			defer cancel()
			start := time.Now()
			if err := r.Run(ctx, f); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: every block ran in %s", d.path, time.Since(start).Round(time.Second))
		})
	}
}

func readFile(root, path, section string) (File, error) {
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return File{}, err
	}
	f := File{Name: path, Src: string(raw)}
	if section != "" {
		if f.From, f.To, err = Section(f.Src, section); err != nil {
			return File{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return f, nil
}

// blockEnv is the harness's environment as the blocks get it: the
// repository's bin/ first on PATH, and no KUBECONFIG (a block exports
// the dev one itself, as its reader does).
func blockEnv(root string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "KUBECONFIG="):
		case strings.HasPrefix(kv, "PATH="):
			env = append(env, "PATH="+filepath.Join(root, "bin")+":"+strings.TrimPrefix(kv, "PATH="))
		default:
			env = append(env, kv)
		}
	}
	return env
}

// refuseRunningDev fails when a dev control plane runs already: it is
// someone's `make run`, and the docs would run against it and the
// harness's `make dev-down` stop it.
func refuseRunningDev(root string) error {
	if fi, err := os.Lstat(filepath.Join(root, "bin")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s/bin is a symlink: make run's agent refuses state and run roots that cross one "+
			"(bin/dev/state, bin/dev/run), so no Instance would start; run from a checkout whose bin/ is a directory", root)
	}
	pidFile := filepath.Join(root, "bin", "dev", "kube-apiserver.pid")
	if raw, err := os.ReadFile(pidFile); err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("a dev control plane is already running (kube-apiserver pid %d in %s): "+
				"it is not this test's; stop it with `make dev-down` (or wait for its owner) and run again", pid, pidFile)
		}
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", devAPIPort), time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("something listens on 127.0.0.1:%s, the dev kube-apiserver's port: "+
			"a dev control plane of another checkout? stop it and run again", devAPIPort)
	}
	return nil
}

func devDown(t *testing.T, root string) {
	cmd := exec.Command("make", "--no-print-directory", "dev-down")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("make dev-down: %v\n%s", err, out)
	}
}
