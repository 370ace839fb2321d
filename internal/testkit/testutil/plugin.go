package testutil

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// TickerApp serves its socket and prints a numbered tick, naming its
// generation, every 100 ms: an app whose logs show what they should.
const TickerApp = `import http.server, os, socketserver, threading, time
gen = os.environ["UNITLET_GENERATION"]
def tick():
    n = 0
    while True:
        print("tick g%s %d" % (gen, n), flush=True); n += 1; time.sleep(0.1)
threading.Thread(target=tick, daemon=True).start()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "3"); self.end_headers(); self.wfile.write(b"ok\n")
    def log_message(self, *a): pass
class S(socketserver.UnixStreamServer):
    def get_request(self):
        c, _ = self.socket.accept(); return c, ("unix", 0)
S(os.environ["UNITLET_APP_SOCKET"], H).serve_forever()
`

// PluginBinary is the kubectl plugin that `make build` writes.
func PluginBinary() string { return filepath.Join(testenv.RepoRoot(), "bin", "kubectl-unitlet") }

// Kubectl runs kubectl as the suite's administrator and returns its output.
type Kubectl func(t testing.TB, args ...string) string

// Roles a test binds its plugin users to: the built-in view and edit
// where a controller-manager aggregates unitlet's roles into them (a
// cluster, as docs/operator-guide.md tells an administrator),
// unitlet-view and unitlet-edit themselves where none runs (a bare API
// server).
type Roles struct{ View, Edit string }

var (
	BuiltinRoles = Roles{View: "view", Edit: "edit"}
	UnitletRoles = Roles{View: "unitlet-view", Edit: "unitlet-edit"}
)

// PluginUsers makes two real users of the API server as ServiceAccounts
// of namespace ns and returns a token of each (TokenRequest API): viewer
// bound to roles.View, editor to roles.View and roles.Edit, by
// RoleBindings in ns and nothing else. The API server and the relay, never an agent, judge
// them. Everything is removed when t ends.
func PluginUsers(t testing.TB, kubectl Kubectl, ns string, roles Roles, viewer, editor string) (viewerToken, editorToken string) {
	t.Helper()
	kubectl(t, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "user_roles.yaml"))
	binding := "unitlet-plugin-"
	for _, sa := range []string{viewer, editor} {
		kubectl(t, "-n", ns, "create", "serviceaccount", sa)
	}
	// The editor holds both roles, as edit holds view's rules.
	kubectl(t, "-n", ns, "create", "rolebinding", binding+"view", "--clusterrole="+roles.View,
		"--serviceaccount="+ns+":"+viewer, "--serviceaccount="+ns+":"+editor)
	kubectl(t, "-n", ns, "create", "rolebinding", binding+"edit", "--clusterrole="+roles.Edit, "--serviceaccount="+ns+":"+editor)
	t.Cleanup(func() {
		kubectl(t, "-n", ns, "delete", "rolebinding", binding+"view", binding+"edit", "--ignore-not-found")
		kubectl(t, "-n", ns, "delete", "serviceaccount", viewer, editor, "--ignore-not-found")
	})
	token := func(sa string) string {
		return strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", sa, "--duration=1h"))
	}
	return token(viewer), token(editor)
}

// Kubeconfig is a kubeconfig for user with token against the API server
// at server (CA caData), in namespace ns.
func Kubeconfig(t testing.TB, server string, caData []byte, ns, user, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["api"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "api", AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = user
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// PluginRun is one kubectl-unitlet process.
type PluginRun struct {
	Cmd            *exec.Cmd
	stdout, stderr SyncBuffer
	done           chan struct{}
	err            error
}

// StartPlugin starts bin/kubectl-unitlet with args as the user of
// kubeconfig, with an empty stdin; it is killed when t ends.
func StartPlugin(t *testing.T, kubeconfig string, args ...string) *PluginRun {
	t.Helper()
	p, _ := startPlugin(t, kubeconfig, false, args)
	return p
}

// StartPluginPiped is StartPlugin with a stdin the test writes.
func StartPluginPiped(t *testing.T, kubeconfig string, args ...string) (*PluginRun, io.WriteCloser) {
	t.Helper()
	return startPlugin(t, kubeconfig, true, args)
}

func startPlugin(t *testing.T, kubeconfig string, piped bool, args []string) (*PluginRun, io.WriteCloser) {
	t.Helper()
	p := &PluginRun{Cmd: exec.Command(PluginBinary(), args...), done: make(chan struct{})}
	p.Cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	p.Cmd.Stdout, p.Cmd.Stderr = &p.stdout, &p.stderr
	var in io.WriteCloser
	if piped {
		var err error
		if in, err = p.Cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	})
	return p, in
}

// Plugin runs bin/kubectl-unitlet to its end.
func Plugin(t *testing.T, kubeconfig string, args ...string) *PluginRun {
	t.Helper()
	p := StartPlugin(t, kubeconfig, args...)
	p.Wait()
	return p
}

// Wait waits for the process to end and returns its exit code.
func (p *PluginRun) Wait() int {
	<-p.done
	return p.Code()
}

// Done is closed once the process ended.
func (p *PluginRun) Done() <-chan struct{} { return p.done }

// Code is the exit code (-1 while it runs or when a signal ended it).
func (p *PluginRun) Code() int {
	select {
	case <-p.done:
	default:
		return -1
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// Stdout and Stderr are what it wrote so far.
func (p *PluginRun) Stdout() string { return p.stdout.String() }
func (p *PluginRun) Stderr() string { return p.stderr.String() }

// SyncBuffer collects a process's output: safe to read while it writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
