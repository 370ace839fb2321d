package testutil

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// NaiveAppSource is the app most people write: Python's threading HTTP server
// on its socket, with no SIGTERM handler, so it dies at once when told to
// stop, whatever it was answering. With LISTEN_FDS for it, it serves the
// socket it was handed (fd 3) instead of binding UNITLET_APP_SOCKET.
const NaiveAppSource = `import http.server, os, socket, socketserver
gen = os.environ.get("UNITLET_GENERATION", "?")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("naive generation %s\n" % gen).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128
    def get_request(self):
        c, _ = self.socket.accept(); return c, ("unix", 0)
if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
    srv = S(None, H, bind_and_activate=False); srv.socket.close(); srv.socket = socket.socket(fileno=3)
else:
    srv = S(os.environ["UNITLET_APP_SOCKET"], H)
srv.serve_forever()
`

// NaiveApp makes t's template run the naive app with python, answered
// ready once it answers /.
func NaiveApp(python string) func(*v1.Instance) {
	return func(i *v1.Instance) {
		i.Spec.Template.Command = []string{python}
		i.Spec.Template.Args = []string{"-c", NaiveAppSource}
		ReadyOnGet(i)
	}
}

// ReadyOnGet makes i's template ready once its app answers GET /, within
// 30 s of its start.
func ReadyOnGet(i *v1.Instance) {
	i.Spec.Template.Readiness = &v1.Readiness{HTTPGet: &v1.HTTPGetProbe{Path: "/"}, TimeoutSeconds: 30}
}

// SwapsUnderLoad sends GETs to http://addr/ from workers clients while
// the Instance name is swapped swaps times (an env var changed each
// time), until every superseded generation is proven gone and at least
// min requests were sent. It fails t on any failed request, on a swap
// that no request saw, and on a superseded generation whose drain was
// not proven (ended by the limit). Each swap's requests (from its update
// until the old generation is proven gone) are counted apart.
func (a API) SwapsUnderLoad(t testing.TB, name, addr string, workers int, min int64, swaps int) *Load {
	t.Helper()
	l := StartLoad(addr, workers, min, 10*time.Minute)
	defer l.Stop()
	first := a.Instance(t, name).Status.ActiveGeneration
	var during int64
	for k := 1; k <= swaps; k++ {
		time.Sleep(2 * time.Second) // load on the serving generation first
		from := l.Tally()
		a.UpdateInstance(t, name, time.Minute, func(i *v1.Instance) {
			i.Spec.Template.Env = append(i.Spec.Template.Env, v1.EnvVar{Name: fmt.Sprintf("SWAP_%d", k), Value: "1"})
		})
		old := first + int64(k) - 1
		a.WaitServing(t, name, old+1)
		c := a.WaitDrainProven(t, name, old)
		swap := l.Tally().Since(from)
		during += swap.Total()
		fmt.Printf("%s swap %d: %d requests during it (%d failed); generation %d %s\n", name, k, swap.Total(), swap.Failed, old, c.Message)
		if swap.OK == 0 {
			t.Fatalf("swap %d: no request was answered during it: it was not under load", k)
		}
	}
	l.Stop()
	fmt.Printf("%s, %d swaps: %d requests (%d during the swaps, %d after), %d failed, by answer: %v\n",
		name, swaps, l.Total(), during, l.Total()-during, l.Failed.Load(), l.Bodies())
	if l.Failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed across the swaps; first: %v", l.Failed.Load(), l.Total(), l.FirstErr())
	}
	if l.Total() < min {
		t.Fatalf("only %d requests sent, want %d", l.Total(), min)
	}
	return l
}

// WaitDrainProven waits until generation gen of Instance name is
// Terminated and fails t unless it was stopped after a proven drain; it
// returns the Drained condition.
func (a API) WaitDrainProven(t testing.TB, name string, gen int64) *metav1.Condition {
	t.Helper()
	Eventually(t, fmt.Sprintf("generation %d drained and proven gone", gen), 2*time.Minute, a.Every, func() (bool, string) {
		g := a.Generation(t, name, gen)
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated), Conditions(g.Status.Conditions)
	})
	g := a.Generation(t, name, gen)
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionDrained)
	if c == nil || c.Reason != v1.ReasonDrainProven {
		t.Fatalf("generation %d was stopped without a proven drain: %s", gen, Conditions(g.Status.Conditions))
	}
	return c
}

// NewInstance builds an Overlap Instance called name on node (host
// NAME.example.com, a small tier) and applies opts to it.
func NewInstance(name, node string, opts ...func(*v1.Instance)) *v1.Instance {
	i := &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: v1.InstanceSpec{
			Host: name + ".example.com", NodeName: node, Strategy: v1.StrategyOverlap,
			Template: v1.Template{
				Tier: v1.Tier{Memory: resource.MustParse("128Mi"), CPU: resource.MustParse("500m"), Pids: 512},
			},
		},
	}
	for _, o := range opts {
		o(i)
	}
	return i
}

// SetEnv is env with name set to value, in place when it is there.
func SetEnv(env []v1.EnvVar, name, value string) []v1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			env[i].Value = value
			return env
		}
	}
	return append(env, v1.EnvVar{Name: name, Value: value})
}
