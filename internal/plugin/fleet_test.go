package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// fleet is a real API server with the unitlet CRDs, its client as the
// control plane's, and kubeconfigs of an administrator and of a user
// given nothing.
type fleet struct {
	k8s           client.Client
	admin, nobody string
}

func startFleet(t *testing.T) fleet {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kubeconfig := func(u envtest.User) string {
		user, err := env.AddUser(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, u.Name)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return fleet{k8s: env.Client,
		admin:  kubeconfig(envtest.User{Name: "fleet-admin", Groups: []string{"system:masters"}}),
		nobody: kubeconfig(envtest.User{Name: "app-dev"})}
}

// run is the plugin's command line with kubeconfig: its exit code,
// stdout and stderr.
func run(kubeconfig string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := Run(context.Background(), streams, append([]string{"--kubeconfig", kubeconfig}, args...))
	return code, out.String(), errOut.String()
}

func (f fleet) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := f.k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func instance(ns, name, node string, moves v1.MovePolicy) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.InstanceSpec{Host: name + "." + ns + ".example.com", NodeName: node, Placement: &v1.Placement{Moves: moves},
			Template: v1.Template{Command: []string{"/usr/bin/app"},
				Tier: v1.Tier{Memory: apiresource.MustParse("64Mi"), CPU: apiresource.MustParse("100m"), Pids: 32}}},
	}
}

// serve is what an agent of node writes once generation number of in
// serves: the Generation, then the Instance's status.
func (f fleet) serve(ctx context.Context, in *v1.Instance, node string, number int64) error {
	g := &v1.Generation{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: fmt.Sprintf("%s-%d", in.Name, number)},
		Spec: v1.GenerationSpec{Instance: in.Name, NodeName: node, Number: number, Template: in.Spec.Template}}
	if err := f.k8s.Create(ctx, g); err != nil {
		return err
	}
	in.Status.NodeName, in.Status.ActiveGeneration = node, number
	return f.k8s.Status().Update(ctx, in)
}

// assertLines fails unless each of want is a whole line of got.
func assertLines(t *testing.T, what, got string, want ...string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	for _, w := range want {
		if !contains(lines, w) {
			t.Errorf("%s lacks the line %q:\n%s", what, w, got)
		}
	}
}

func assertHas(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// cordon and uncordon against a real API server: kubectl's words, the
// Enrollment's spec.unschedulable, and clear refusals.
func TestCordonAgainstAPIServer(t *testing.T) {
	f := startFleet(t)
	f.create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	unschedulable := func() bool {
		var e v1.Enrollment
		if err := f.k8s.Get(context.Background(), client.ObjectKey{Name: "node-a"}, &e); err != nil {
			t.Fatal(err)
		}
		return e.Spec.Unschedulable
	}
	steps := []struct {
		kubeconfig        string
		args              []string
		wantCode          int
		wantOut, wantErr  string
		wantUnschedulable bool
	}{
		{f.admin, []string{"cordon", "node-a", "--dry-run"}, 0, "enrollment/node-a cordoned (server dry run)\n", "", false},
		{f.admin, []string{"cordon", "node-a"}, 0, "enrollment/node-a cordoned\n", "", true},
		{f.admin, []string{"cordon", "node-a"}, 0, "enrollment/node-a already cordoned\n", "", true},
		{f.admin, []string{"uncordon", "node-a"}, 0, "enrollment/node-a uncordoned\n", "", false},
		{f.admin, []string{"uncordon", "node-a"}, 0, "enrollment/node-a already uncordoned\n", "", false},
		{f.admin, []string{"cordon", "node-z"}, ExitError, "",
			"error: node \"node-z\" has no Enrollment: it is not enrolled (kubectl get enrollments lists the nodes)\n", false},
		{f.nobody, []string{"cordon", "node-a"}, ExitError, "", "error: you may not read enrollment/node-a: ", false},
		{f.admin, []string{"cordon"}, ExitUsage, "", "error: name one node: kubectl unitlet cordon NODE\n", false},
	}
	for i, s := range steps {
		code, out, errOut := run(s.kubeconfig, s.args...)
		if code != s.wantCode || out != s.wantOut || !strings.HasPrefix(errOut, s.wantErr) {
			t.Errorf("step %d %q: got %d, %q, %q; want %d, %q, %q...", i, s.args, code, out, errOut, s.wantCode, s.wantOut, s.wantErr)
		}
		if s.kubeconfig == f.nobody {
			assertHas(t, "the refusal", errOut, "403 Forbidden", "Enrollments are cluster-scoped")
		}
		if got := unschedulable(); got != s.wantUnschedulable {
			t.Errorf("step %d %q: spec.unschedulable = %v, want %v", i, s.args, got, s.wantUnschedulable)
		}
	}
	// The shell completes a node's name from the Enrollments.
	f.create(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	for _, c := range []string{"cordon", "uncordon", "drain"} {
		_, out, _ := run(f.admin, "__complete", c, "node-")
		if want := "node-a\nnode-b\n:4\n"; out != want {
			t.Errorf("__complete %s node-: %q, want %q", c, out, want)
		}
	}
}

// placeAndServe plays the placement controller and the agents of node-a
// and node-b until ctx ends: it moves each Instance asked to move off
// node-a to node-b (removing the ask in the same write), serves it there
// with its next generation, and proves its generations on node-a gone
// only retireAfter later (the settle and the drain of the old one), so
// a drain that did not wait for that proof would end before it.
func (f fleet) placeAndServe(ctx context.Context, t *testing.T) {
	served := map[string]time.Time{}
	for ctx.Err() == nil {
		var insts v1.InstanceList
		if err := f.k8s.List(ctx, &insts); err == nil {
			for i := range insts.Items {
				if err := f.step(ctx, &insts.Items[i], served); err != nil && ctx.Err() == nil {
					t.Errorf("placement/agent fake: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

const retireAfter = 2500 * time.Millisecond

func (f fleet) step(ctx context.Context, in *v1.Instance, served map[string]time.Time) error {
	key := in.Namespace + "/" + in.Name
	switch {
	case in.Spec.NodeName == "node-a" && in.Annotations[v1.AnnotationMoveFrom] == "node-a" && in.Spec.MovesAllowed():
		delete(in.Annotations, v1.AnnotationMoveFrom)
		in.Spec.NodeName = "node-b"
		return f.k8s.Update(ctx, in)
	case in.Spec.NodeName == "node-b" && in.Status.NodeName == "node-a":
		served[key] = time.Now()
		return f.serve(ctx, in, "node-b", in.Status.ActiveGeneration+1)
	case in.Status.NodeName == "node-b" && !served[key].IsZero() && time.Since(served[key]) > retireAfter:
		return f.proveGone(ctx, in, "node-a")
	}
	return nil
}

// proveGone writes Terminated=True on in's Generations on node.
func (f fleet) proveGone(ctx context.Context, in *v1.Instance, node string) error {
	var gens v1.GenerationList
	if err := f.k8s.List(ctx, &gens, client.InNamespace(in.Namespace)); err != nil {
		return err
	}
	for i := range gens.Items {
		g := &gens.Items[i]
		if g.Spec.Instance != in.Name || g.Spec.NodeName != node || meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
			continue
		}
		meta.SetStatusCondition(&g.Status.Conditions, metav1.Condition{Type: v1.ConditionTerminated, Status: metav1.ConditionTrue, Reason: "Stopped", Message: "proven gone"})
		if err := f.k8s.Status().Update(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// drain against a real API server, with the placement controller and
// the agents played by the test: the dry run changes nothing, a drain
// nobody moves for times out naming what is left, one whose moves are
// done lists what stays (moves Never) and exits 1, and an empty node
// exits 0.
func TestDrainAgainstAPIServer(t *testing.T) {
	f := startFleet(t)
	ctx := context.Background()
	f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
		&v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	insts := []*v1.Instance{instance("shop", "web", "node-a", v1.MovesAllowed), instance("shop", "api", "node-a", v1.MovesAllowed),
		instance("shop", "db", "node-a", v1.MovesNever), instance("jobs", "batch", "node-a", v1.MovesAllowed),
		instance("shop", "cart", "node-b", v1.MovesAllowed)}
	for _, in := range insts {
		f.create(t, in)
		if err := f.serve(ctx, in, in.Spec.NodeName, 1); err != nil {
			t.Fatal(err)
		}
	}
	annotations := func() map[string]string {
		out := map[string]string{}
		for _, in := range insts {
			var got v1.Instance
			if err := f.k8s.Get(ctx, client.ObjectKeyFromObject(in), &got); err != nil {
				t.Fatal(err)
			}
			if v, ok := got.Annotations[v1.AnnotationMoveFrom]; ok {
				out[in.Namespace+"/"+in.Name] = v
			}
		}
		return out
	}

	code, out, errOut := run(f.admin, "drain", "node-a", "--dry-run")
	assertCode(t, "dry run", code, ExitError, errOut)
	assertLines(t, "dry run", out, "enrollment/node-a cordoned (server dry run)", "instance/jobs/batch would be moved (server dry run)",
		"instance/shop/api would be moved (server dry run)", "instance/shop/db stays: moves: Never: its data dir lives on node-a",
		"instance/shop/web would be moved (server dry run)")
	assertHas(t, "dry run", errOut, "error: enrollment/node-a would not be empty: 1 Instance(s) would stay, their moves are Never: instance/shop/db")
	if got := annotations(); len(got) != 0 {
		t.Errorf("dry run asked moves: %v", got)
	}

	code, _, errOut = run(f.admin, "drain", "node-a", "-n", "shop", "-A")
	assertCode(t, "-n and -A", code, ExitUsage, errOut)
	code, _, errOut = run(f.nobody, "drain", "node-a")
	assertCode(t, "no rights", code, ExitError, errOut)
	assertHas(t, "no rights", errOut, "you may not read enrollment/node-a", "403 Forbidden", "cluster-scoped")
	code, _, errOut = run(f.admin, "drain", "node-z")
	assertCode(t, "no Enrollment", code, ExitError, errOut)
	assertHas(t, "no Enrollment", errOut, `node "node-z" has no Enrollment`)

	// Nobody moves anything: the moves are asked, and the drain times out.
	code, out, errOut = run(f.admin, "drain", "node-a", "--timeout=2s")
	assertCode(t, "timeout", code, ExitError, errOut)
	assertLines(t, "timeout", out, "enrollment/node-a cordoned", "instance/shop/web waiting for a node",
		"instance/shop/db stays: moves: Never: its data dir lives on node-a")
	assertLines(t, "timeout", errOut, "error: drain of node-a timed out after 2s with 3 Instance(s) not moved off it",
		"  instance/jobs/batch waiting for a node", "  instance/shop/api waiting for a node", "  instance/shop/web waiting for a node",
		"and 1 that stay, their moves are Never: instance/shop/db")
	want := map[string]string{"shop/web": "node-a", "shop/api": "node-a", "jobs/batch": "node-a"}
	if got := annotations(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("moves asked: %v, want %v", got, want)
	}

	// The placement controller and the agents move them.
	fakeCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.placeAndServe(fakeCtx, t) }()
	defer func() { stop(); <-done }()
	code, out, errOut = run(f.admin, "drain", "node-a", "--timeout=60s")
	t.Logf("kubectl unitlet drain node-a:\n%s%s", out, errOut)
	assertCode(t, "moves done", code, ExitError, errOut)
	assertLines(t, "moves done", out, "enrollment/node-a already cordoned",
		"instance/shop/web serving on node-b, stopping generation 1 on node-a", "instance/jobs/batch moved to node-b",
		"instance/shop/api moved to node-b", "instance/shop/web moved to node-b")
	assertLines(t, "moves done", errOut, "error: enrollment/node-a is not empty: 1 Instance(s) stay, their moves are Never: instance/shop/db")
	for _, in := range insts[:2] {
		var gens v1.GenerationList
		if err := f.k8s.List(ctx, &gens, client.InNamespace(in.Namespace), client.MatchingFields{v1.FieldNodeName: "node-a"}); err != nil {
			t.Fatal(err)
		}
		for _, g := range gens.Items {
			if g.Spec.Instance == in.Name && !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated) {
				t.Errorf("the drain ended with %s of %s on node-a not Terminated", g.Name, in.Name)
			}
		}
	}

	// A namespace with nothing left on the node, then the whole node once
	// the moves-Never Instance is deleted: drained, exit 0.
	code, out, errOut = run(f.admin, "drain", "node-a", "-n", "jobs")
	assertCode(t, "-n jobs", code, 0, errOut)
	assertHas(t, "-n jobs", out, "enrollment/node-a already cordoned\nenrollment/node-a drained\n")
	if err := f.k8s.Delete(ctx, insts[2]); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(f.admin, "drain", "node-a")
	assertCode(t, "empty node", code, 0, errOut)
	assertHas(t, "empty node", out, "enrollment/node-a drained\n")
}

func assertCode(t *testing.T, what string, got, want int, stderr string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: exit code %d, want %d; stderr:\n%s", what, got, want, stderr)
	}
}
