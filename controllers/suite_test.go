package controllers

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/boot"
)

const testNode = "node-test"

// How long a wait may take, and how often it looks again.
const (
	waitLimit = 20 * time.Second
	pollEvery = 50 * time.Millisecond
)

var (
	env  *testenv.Env
	k8s  client.Client
	fake *fakeRuntime
	// kube is how the tests read and change objects; set with k8s.
	kube testutil.API
)

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	kube = testutil.API{Client: k8s, Every: pollEvery}
	fake = newFakeRuntime()
	ctx, cancel := context.WithCancel(context.Background())
	// The cluster side's key minter, as `unitlet cluster` runs it: no
	// Instance makes a generation without its key.
	if err := startKeyMinter(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := startAgent(ctx, testNode, fake); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

// testObserveEvery is how often the tests' agent looks at a running
// generation again with no event.
const testObserveEvery = 2 * time.Second

// testRestartBackoff is the first restart backoff of a sidecar that dies
// twice in a row, short for the tests.
const testRestartBackoff = 2 * time.Second

// startAgent runs both reconcilers as node name with rt, as the agent does.
func startAgent(ctx context.Context, name string, rt nodeRuntime) error {
	_, err := startAgentBoot(ctx, name, rt, nil)
	return err
}

// startAgentBoot is startAgent keeping rec as the node's boot record; the
// channel closes once the agent stopped. mods change the manager's
// options (a test's client between the agent and the API server).
func startAgentBoot(ctx context.Context, name string, rt nodeRuntime, rec *boot.Record, mods ...func(*ctrl.Options)) (<-chan struct{}, error) {
	opts := ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// A test may run a second agent (another node) in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      cache.Options{ByObject: NodeCache(name)},
	}
	for _, m := range mods {
		m(&opts)
	}
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return nil, err
	}
	if err := SetupHosting(mgr, Hosting{Runtime: rt, NodeName: name, Recorder: mgr.GetEventRecorder("unitlet-agent"),
		Grace: time.Second, ProbeInterval: 50 * time.Millisecond, ObserveEvery: testObserveEvery,
		RestartBackoff: Backoff{Initial: testRestartBackoff, Max: 2 * testRestartBackoff}, Boot: rec}); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = mgr.Start(ctx)
	}()
	return stopped, nil
}

// instance builds a valid Instance for the test node.
func instance(name string, opts ...func(*v1.Instance)) *v1.Instance {
	i := &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.InstanceSpec{
			Host: name + ".example.com", NodeName: testNode, Strategy: v1.StrategyOverlap,
			Template: v1.Template{
				Command:   []string{"/usr/bin/app"},
				Tier:      v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32},
				Readiness: &v1.Readiness{Socket: &v1.SocketProbe{}, TimeoutSeconds: 30},
			},
		},
	}
	for _, o := range opts {
		o(i)
	}
	return i
}

func replace(i *v1.Instance) { i.Spec.Strategy = v1.StrategyReplace }

func getInstance(t *testing.T, name string) *v1.Instance {
	t.Helper()
	return kube.Instance(t, name)
}

// getGeneration is nil while generation n of inst cannot be read (it does
// not exist yet).
func getGeneration(t *testing.T, inst string, n int64) *v1.Generation {
	t.Helper()
	g := &v1.Generation{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: generationName(inst, n)}, g); err != nil {
		return nil
	}
	return g
}

// condition renders one condition as "Status/Reason" for comparisons.
func condition(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason
}

func conditionsOf(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(parts, " ")
}

// waitInstance waits until the Instance's condition typ is want.
func waitInstance(t *testing.T, name, typ, want string) *v1.Instance {
	t.Helper()
	var inst *v1.Instance
	testutil.Eventually(t, fmt.Sprintf("%s %s=%s", name, typ, want), waitLimit, pollEvery, func() (bool, string) {
		inst = getInstance(t, name)
		return condition(inst.Status.Conditions, typ) == want, conditionsOf(inst.Status.Conditions)
	})
	return inst
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// updateInstance re-reads the Instance and applies mutate, retrying conflicts.
func updateInstance(t *testing.T, name string, mutate func(*v1.Instance)) {
	t.Helper()
	kube.UpdateInstance(t, name, waitLimit, mutate)
}

// conditionSeries returns the unitlet_instance_condition samples of one
// Instance that are 1, as "Type=Status".
func conditionSeries(t *testing.T, name string) []string {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "unitlet_instance_condition" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == name && m.GetGauge().GetValue() == 1 {
				out = append(out, labels["type"]+"="+labels["status"])
			}
		}
	}
	sort.Strings(out)
	return out
}
