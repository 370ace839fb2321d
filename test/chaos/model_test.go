package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// app is a tiny HTTP server on the generation's socket that answers
// "gen N" and exits at SIGTERM at once (no drain of its own).
const app = `import http.server, os, signal, socketserver, sys
gen = os.environ.get("UNITLET_GENERATION", "?")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("gen %s\n" % gen).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.UnixStreamServer):
    def get_request(self):
        c, _ = self.socket.accept(); return c, ("unix", 0)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
S(os.environ["UNITLET_APP_SOCKET"], H).serve_forever()
`

// loggingApp is app writing a line to its output every 20 ms and one per
// request: a request waits for its line, so a blocked output shows as a
// request that never gets its answer.
var loggingApp = `import threading, time
def chatter():
    i = 0
    while True:
        print("line %d" % i, flush=True); i += 1; time.sleep(0.02)
threading.Thread(target=chatter, daemon=True).start()
` + strings.Replace(app, "    def do_GET(self):\n", "    def do_GET(self):\n        print(\"request %s\" % self.path, flush=True)\n", 1)

// desired is what the test asked of one Instance; the agent must reach it.
type desired struct {
	strategy  v1.Strategy
	salt      int
	suspended bool
	deleted   bool
	logging   bool // runs loggingApp
}

// model is the test's record of every Instance it made on one node.
type model struct {
	node string
	mu   sync.Mutex
	want map[string]*desired
}

func newModel(node string) *model { return &model{node: node, want: map[string]*desired{}} }

func (m *model) get(name string) (desired, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.want[name]
	if !ok {
		return desired{}, false
	}
	return *d, true
}

func (m *model) set(name string, d desired) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want[name] = &d
}

func (m *model) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.want))
	for n := range m.want {
		out = append(out, n)
	}
	return out
}

// instance builds the chaos app as Instance name on node.
func instance(name, node string, d desired) *v1.Instance {
	code := app
	if d.logging {
		code = loggingApp
	}
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Namespace: testutil.Namespace, Name: name},
		Spec: v1.InstanceSpec{
			Host: name + ".chaos.test", NodeName: node, Strategy: d.strategy, Suspend: d.suspended,
			GenerationHistoryLimit: ptr.To[int32](2),
			Template: v1.Template{
				Command: []string{"/usr/bin/python3"}, Args: []string{"-c", code},
				Env:       []v1.EnvVar{{Name: "SALT", Value: strconv.Itoa(d.salt)}},
				Tier:      v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("200m"), Pids: 32},
				Readiness: &v1.Readiness{HTTPGet: &v1.HTTPGetProbe{Path: "/healthz"}, TimeoutSeconds: 30},
			},
		},
	}
}

func salt(tpl v1.Template) string {
	for _, e := range tpl.Env {
		if e.Name == "SALT" {
			return e.Value
		}
	}
	return ""
}

// apply makes the API hold d for Instance name (create, update or delete).
func (m *model) apply(ctx context.Context, name string, d desired) error {
	m.set(name, d)
	inst := &v1.Instance{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst)
	switch {
	case d.deleted:
		if err != nil {
			return client.IgnoreNotFound(err)
		}
		return client.IgnoreNotFound(k8s.Delete(ctx, inst))
	case client.IgnoreNotFound(err) != nil:
		return err
	case err != nil:
		return k8s.Create(ctx, instance(name, m.node, d))
	}
	want := instance(name, m.node, d)
	inst.Spec = want.Spec
	return k8s.Update(ctx, inst)
}

// settled says whether Instance name is as the test last asked, and if
// not, what it is.
func (m *model) settled(ctx context.Context, name string) (bool, string) {
	d, _ := m.get(name)
	inst := &v1.Instance{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: testutil.Namespace, Name: name}, inst)
	if d.deleted {
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("still there: %v %s", err, testutil.Conditions(inst.Status.Conditions))
	}
	if err != nil {
		return false, err.Error()
	}
	ready := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReady)
	state := fmt.Sprintf("observed %d/%d active %d %s", inst.Status.ObservedGeneration, inst.Generation, inst.Status.ActiveGeneration, testutil.Conditions(inst.Status.Conditions))
	if inst.Status.ObservedGeneration != inst.Generation || ready == nil || ready.Status != metav1.ConditionTrue {
		return false, state
	}
	gens, err := generationsOf(ctx, name)
	if err != nil {
		return false, err.Error()
	}
	for _, g := range gens {
		active := !d.suspended && g.Spec.Number == inst.Status.ActiveGeneration
		if active && salt(g.Spec.Template) != strconv.Itoa(d.salt) {
			return false, state + "; active generation runs an older template"
		}
		if !active && !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			return false, fmt.Sprintf("%s; generation %d not proven gone yet", state, g.Spec.Number)
		}
	}
	if d.suspended {
		return ready.Reason == v1.ReasonSuspended, state
	}
	return inst.Status.ActiveGeneration > 0, state
}

// waitSettled waits until every Instance of m is as asked.
func (m *model) waitSettled(t *testing.T) {
	t.Helper()
	for _, name := range m.names() {
		testutil.Eventually(t, name+" as asked", settleLimit, pollEvery, func() (bool, string) {
			return m.settled(context.Background(), name)
		})
	}
}

func generationsOf(ctx context.Context, name string) ([]v1.Generation, error) {
	var gens v1.GenerationList
	err := k8s.List(ctx, &gens, client.InNamespace(testutil.Namespace), client.MatchingLabels{v1.LabelInstance: name})
	return gens.Items, err
}
