package agent

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/version"
	"github.com/unitlet/unitlet/runtime/join"
)

// hostingProbe stands in for setupHosting: it counts the calls, keeps the
// gate it was given, and registers a reconciler that only records the
// Instances it sees, so the test shows reconcilers added to the running
// manager run, and none ran before.
type hostingProbe struct {
	mu    sync.Mutex
	calls int
	gate  hostgate.Gate
	seen  map[string]bool
	// closes counts the runs of what setup registered at exit, as the
	// real setupHosting registers the node runtime's close.
	closes int
}

func (p *hostingProbe) setup(mgr ctrl.Manager, opts Options) error {
	p.mu.Lock()
	p.calls++
	p.gate = opts.Gate
	p.mu.Unlock()
	opts.atExit.add(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.closes++
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).For(&v1.Instance{}).Named("test-hosting-probe").
		// Each test's agent registers it once in this one process.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(reconcileFunc(func(_ context.Context, req ctrl.Request) (ctrl.Result, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.seen == nil {
				p.seen = map[string]bool{}
			}
			p.seen[req.Name] = true
			return ctrl.Result{}, nil
		}))
}

func (p *hostingProbe) state() (calls int, accepting bool, seen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		accepting = p.gate.Accepting()
	}
	return p.calls, accepting, len(p.seen)
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, r ctrl.Request) (ctrl.Result, error) {
	return f(ctx, r)
}

// testAgent is one agent process of the package's Run, as node, with the
// agent's own credentials (config/rbac, config/policy) and a fast schedule.
type testAgent struct {
	probe *hostingProbe
	addr  string
	node  string
	opts  Options
	stop  func() error
}

// startAgent runs an agent for node; tune, when given, changes its
// joining schedule.
func startAgent(t *testing.T, node string, opts Options, tune ...func(*joining)) *testAgent {
	t.Helper()
	installAgentCredentials(t)
	a := &testAgent{probe: &hostingProbe{}, addr: testutil.FreePort(t), node: node}
	opts.NodeName = node
	opts.Kubeconfig = agentKubeconfig(t, node)
	opts.ProbeAddr = a.addr
	opts.MetricsAddr = "0"
	opts.UnitBackend = BackendDirect
	opts.SocketGroup = "root"
	opts.LeaseNamespace = cmp.Or(opts.LeaseNamespace, "unitlet-system")
	a.opts = opts
	j := joining{every: 100 * time.Millisecond, prepareEvery: 300 * time.Millisecond,
		leaseRenew: 200 * time.Millisecond, leaseDuration: 2 * time.Second, clock: clock.RealClock{}, setupHosting: a.probe.setup}
	for _, f := range tune {
		f(&j)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, opts, testr.New(t), j) }()
	var once sync.Once
	var stopErr error
	a.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("the agent did not stop within 30s of its context ending")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = a.stop() })
	t.Cleanup(func() {
		deleteForce(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: node}})
	})
	return a
}

// get returns the HTTP code and body of path on the agent's probe address.
func (a *testAgent) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + a.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// expectStage waits until /hostingz answers code (naming stage when not
// hosting), readiness and liveness answer 200 and the Enrollment's
// Hosting condition has stage as its reason.
func (a *testAgent) expectStage(t *testing.T, code int, stage join.Stage) *v1.Enrollment {
	t.Helper()
	var enr v1.Enrollment
	testutil.Eventually(t, fmt.Sprintf("stage %s, readiness %d", stage, code), waitLimit, pollEvery, testutil.Succeeds(func() error {
		got, body, err := a.get("/hostingz")
		if err != nil || got != code {
			return fmt.Errorf("/hostingz = %d %q, %v; want %d", got, body, err, code)
		}
		if code != http.StatusOK && !strings.Contains(body, string(stage)) {
			return fmt.Errorf("/hostingz = %q, want the stage %s", body, stage)
		}
		if got, body, err := a.get("/readyz"); err != nil || got != http.StatusOK {
			return fmt.Errorf("/readyz = %d %q, %v; readiness is 200 in every stage once reported", got, body, err)
		}
		if got, _, err := a.get("/healthz"); err != nil || got != http.StatusOK {
			return fmt.Errorf("/healthz = %d, %v; liveness must stay 200", got, err)
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: a.node}, &enr); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(enr.Status.Conditions, v1.ConditionHosting)
		if c == nil || c.Reason != string(stage) {
			return fmt.Errorf("Hosting condition %+v, want reason %s", c, stage)
		}
		return nil
	}))
	return &enr
}

func setApproved(t *testing.T, node string, approved bool) {
	t.Helper()
	var enr v1.Enrollment
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(enr.DeepCopy())
	enr.Spec.Approved = approved
	if err := env.Client.Patch(context.Background(), &enr, patch); err != nil {
		t.Fatal(err)
	}
}

func condStatus(enr *v1.Enrollment, typ string) string {
	if c := apimeta.FindStatusCondition(enr.Status.Conditions, typ); c != nil {
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	return "absent"
}

// flowRoots are the agent's roots for the mode flow: the state root exists
// with a mode the guard refuses (and preparation leaves alone), the run
// root and the cgroup root do not exist yet (preparation makes them).
func flowRoots(t *testing.T) Options {
	base := t.TempDir()
	opts := Options{
		StateRoot:         filepath.Join(base, "state"),
		RunRoot:           filepath.Join(base, "run"),
		CgroupRoot:        fmt.Sprintf("jointest-agent-%d", os.Getpid()),
		RequireEnrollment: true,
	}
	if err := os.Mkdir(opts.StateRoot, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(opts.StateRoot, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g := guardFor(opts)
		dirs, _ := g.CgroupDirs()
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove test cgroup: %v", err)
			}
		}
	})
	return opts
}

// TestModeFlow: joining → approved → armed → hosting → approval removed,
// with the readiness code at each stage, and nothing hosted while joining.
func TestModeFlow(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	const node = "flow-node"
	// An Instance for this node exists from the start: while joining no
	// reconciler may touch it.
	inst := instanceOn(node, "flow-app")
	createInstance(t, inst)
	a := startAgent(t, node, opts)

	// Joining, not approved: 503 naming AwaitingApproval; the guard is not
	// armed (the state root is open to all) and nothing is prepared yet.
	enr := a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	if enr.Status.Mode != v1.ModeJoining || !strings.HasPrefix(condStatus(enr, v1.ConditionGuardArmed), "False/GuardCheckFailed:") || !strings.Contains(condStatus(enr, v1.ConditionGuardArmed), "StateRoot:") {
		t.Errorf("joining Enrollment: mode %q, GuardArmed %s", enr.Status.Mode, condStatus(enr, v1.ConditionGuardArmed))
	}
	id, _ := join.ReadIdentity("", "")
	if enr.Status.MachineID != id.MachineID || enr.Status.BootID != id.BootID || enr.Status.Kernel != id.Kernel ||
		enr.Status.Platform != id.Platform || enr.Status.AgentVersion != version.Get() || enr.Status.UnitBackend != BackendDirect ||
		enr.Status.CgroupMode == "" || len(enr.Status.Checks) != 5 {
		t.Errorf("identity not reported: %+v", enr.Status)
	}
	// The node's capacity, read from this machine and, through the agent's
	// own role (get nodes, list pods), its allocatable: a refused read
	// would leave allocatable out.
	testutil.Eventually(t, "capacity reported", waitLimit, pollEvery, testutil.Succeeds(func() error {
		var got v1.Enrollment
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, &got); err != nil {
			return err
		}
		st := got.Status
		if st.Capacity.Memory().IsZero() || st.Capacity.Cpu().IsZero() || len(st.Allocatable) != 3 || len(st.Allocated) != 3 ||
			!st.Allocated.Memory().IsZero() || st.Allocatable.Memory().Cmp(*st.Capacity.Memory()) > 0 {
			return fmt.Errorf("capacity %v, allocatable %v, allocated %v", st.Capacity, st.Allocatable, st.Allocated)
		}
		return nil
	}))
	time.Sleep(10 * a.probeEvery()) // ten re-checks while joining
	if _, err := os.Stat(opts.RunRoot); !os.IsNotExist(err) {
		t.Errorf("run root prepared before approval: %v", err)
	}
	a.expectIdle(t, inst)

	// Approved, not armed: the preparation makes the run and cgroup roots
	// but leaves the open state root alone, so the guard stays unarmed.
	setApproved(t, node, true)
	enr = a.expectStage(t, http.StatusServiceUnavailable, join.StageGuardNotArmed)
	if got := condStatus(enr, v1.ConditionEnrolled); !strings.HasPrefix(got, "True/Approved") {
		t.Errorf("Enrolled = %s, want True/Approved", got)
	}
	testutil.Eventually(t, "run root prepared", waitLimit, pollEvery, testutil.Succeeds(func() error { _, err := os.Stat(opts.RunRoot); return err }))
	a.expectIdle(t, inst)

	// Armed: the administrator fixes the state root; the node hosts, the
	// reconcilers start in this process and see the Instance.
	if err := os.Chmod(opts.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	enr = a.expectStage(t, http.StatusOK, join.StageHosting)
	if enr.Status.Mode != v1.ModeHosting {
		t.Errorf("hosting Enrollment mode %q", enr.Status.Mode)
	}
	for _, c := range []string{v1.ConditionGuardArmed, v1.ConditionEnrolled, v1.ConditionHosting} {
		if got := condStatus(enr, c); !strings.HasPrefix(got, "True/") {
			t.Errorf("%s = %s, want True", c, got)
		}
	}
	testutil.Eventually(t, "the hosting reconcilers see the Instance", waitLimit, pollEvery, testutil.Succeeds(func() error {
		if calls, accepting, seen := a.probe.state(); calls != 1 || !accepting || seen == 0 {
			return fmt.Errorf("setupHosting calls %d, accepting %v, Instances seen %d", calls, accepting, seen)
		}
		return nil
	}))

	// Approval removed: 503 naming ApprovalRevoked, the gate refuses new
	// work, the reconcilers are not registered again.
	setApproved(t, node, false)
	enr = a.expectStage(t, http.StatusServiceUnavailable, join.StageApprovalRevoked)
	if got := condStatus(enr, v1.ConditionEnrolled); !strings.HasPrefix(got, "False/ApprovalRevoked") {
		t.Errorf("Enrolled = %s, want False/ApprovalRevoked", got)
	}
	if calls, accepting, _ := a.probe.state(); calls != 1 || accepting {
		t.Errorf("after revocation: setupHosting calls %d, accepting %v; want 1, false", calls, accepting)
	}

	// Approved again: hosting resumes without a second registration.
	setApproved(t, node, true)
	a.expectStage(t, http.StatusOK, join.StageHosting)
	if calls, accepting, _ := a.probe.state(); calls != 1 || !accepting {
		t.Errorf("re-approved: setupHosting calls %d, accepting %v; want 1, true", calls, accepting)
	}
	if err := a.stop(); err != nil {
		t.Errorf("stop while hosting: %v", err)
	}
}

// TestStopWhileJoining: the agent's context ending (SIGTERM, SIGINT) ends
// it cleanly in the joining mode.
func TestStopWhileJoining(t *testing.T) {
	needRoot(t)
	a := startAgent(t, "stop-node", flowRoots(t))
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	if err := a.stop(); err != nil {
		t.Errorf("stop while joining: %v", err)
	}
	if calls, _, _ := a.probe.state(); calls != 0 {
		t.Errorf("setupHosting called %d times while joining", calls)
	}
}

// TestEnrollmentNotRequired: --require-enrollment=false hosts at once with
// a gate that always accepts, and creates no Enrollment.
func TestEnrollmentNotRequired(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	opts.RequireEnrollment = false
	a := startAgent(t, "dev-node", opts)
	testutil.Eventually(t, "ready at once", waitLimit, pollEvery, testutil.Succeeds(func() error {
		if code, body, err := a.get("/readyz"); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz = %d %q, %v", code, body, err)
		}
		return nil
	}))
	if calls, accepting, _ := a.probe.state(); calls != 1 || !accepting {
		t.Errorf("setupHosting calls %d, accepting %v; want 1, true", calls, accepting)
	}
	var enr v1.Enrollment
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "dev-node"}, &enr); !isNotFound(err) {
		t.Errorf("Enrollment without enrollment required: %v", err)
	}
	if got := a.probe.closesSoFar(); got != 0 {
		t.Errorf("hosting closed %d times while the agent runs", got)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if got := a.probe.closesSoFar(); got != 1 {
		t.Errorf("hosting closed %d times after the agent stopped, want 1", got)
	}
}

func (p *hostingProbe) closesSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closes
}

func (a *testAgent) probeEvery() time.Duration { return 100 * time.Millisecond }

// expectIdle: no reconciler ran for inst. The probe saw nothing, and the
// Instance carries no lease (finalizer) and no status, which is what the
// real reconcilers write first.
func (a *testAgent) expectIdle(t *testing.T, inst *v1.Instance) {
	t.Helper()
	if calls, accepting, seen := a.probe.state(); calls != 0 || accepting || seen != 0 {
		t.Errorf("while joining: setupHosting calls %d, accepting %v, Instances seen %d", calls, accepting, seen)
	}
	var cur v1.Instance
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(inst), &cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Finalizers) > 0 || len(cur.Status.Conditions) > 0 || cur.Status.ObservedGeneration != 0 {
		t.Errorf("Instance touched while joining: finalizers %v, status %+v", cur.Finalizers, cur.Status)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the agent's guard checks root-owned roots and writes cgroups")
	}
}
