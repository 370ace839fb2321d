package fleet

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// drain runs `kubectl unitlet drain` on nodeA while every movable
// Instance there is under load through the router: each moves to another
// node with no failed request, and the unmovable ones are listed and
// left.
func (f *fleet) drain(t *testing.T) {
	allowed, never := onNode(t, f.names, nodeA)
	if len(allowed) == 0 || len(never) == 0 {
		t.Fatalf("node %s holds %d movable and %d unmovable Instances; the step needs both", nodeA, len(allowed), len(never))
	}
	// The router reaches this machine's sockets only: the VM takes no
	// moves.
	if run := testutil.Plugin(t, kubeconfig, "cordon", nodeVM); run.Code() != 0 {
		t.Fatalf("cordon %s: %s%s", nodeVM, run.Stdout(), run.Stderr())
	}
	loads := map[string]*testutil.Load{}
	for _, n := range allowed {
		addr := f.router.listen(f.root, n)
		body, err := httpGet(addr)
		if err != nil {
			t.Fatalf("%s through the router before the drain: %v", n, err)
		}
		f.movedByDrain[n] = body
		loads[n] = testutil.StartLoad(addr, 2, 20, 5*time.Minute)
	}
	run := testutil.StartPlugin(t, kubeconfig, "drain", nodeA, "--timeout", "4m")
	code := run.Wait()
	for _, l := range loads {
		l.Stop()
	}
	t.Logf("drain exit %d\nstdout:\n%s\nstderr:\n%s", code, run.Stdout(), run.Stderr())
	if code == 0 {
		t.Errorf("drain exited 0 with %d unmovable Instances left on %s", len(never), nodeA)
	}
	out := run.Stdout() + run.Stderr()
	for _, n := range never {
		if !strings.Contains(out, n) {
			t.Errorf("drain did not list %s (moves Never)", n)
		}
	}
	if enr := enrollment(t, nodeA); !enr.Spec.Unschedulable {
		t.Errorf("Enrollment %s not cordoned after the drain", nodeA)
	}
	var total, failed int64
	for n, l := range loads {
		total, failed = total+l.Total(), failed+l.Failed.Load()
		if l.Failed.Load() > 0 {
			t.Errorf("%s: %d of %d requests failed during its move; first: %v", n, l.Failed.Load(), l.Total(), l.FirstErr())
		}
		inst := getInstance(t, n)
		if inst.Status.NodeName == nodeA || inst.Spec.NodeName == nodeA {
			t.Errorf("%s still on %s (spec %s, status %s)", n, nodeA, inst.Spec.NodeName, inst.Status.NodeName)
		}
		if ok, why := oldGenerationsGone(t, n, nodeA); !ok {
			t.Errorf("after the drain: %s", why)
		}
	}
	t.Logf("%d movable Instances moved off %s; %d requests through the router during the drain, %d failed", len(allowed), nodeA, total, failed)
	claimsFollow(t, allowed)
	for _, n := range never {
		if inst := getInstance(t, n); inst.Status.NodeName != nodeA {
			t.Errorf("%s (moves Never) left %s for %s", n, nodeA, inst.Status.NodeName)
		}
	}
	// Nothing new lands on the cordoned node.
	probe := appInstance("after-cordon", "beta", v1.MovesAllowed)
	if err := k8s.Create(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "after-cordon bound", time.Minute, pollEvery, func() (bool, string) {
		got := &v1.Instance{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(probe), got); err != nil {
			return false, err.Error()
		}
		return got.Spec.NodeName != "", testutil.Conditions(got.Status.Conditions)
	})
	if got := getInstance(t, "after-cordon"); got.Spec.NodeName == nodeA {
		t.Errorf("after-cordon bound to the cordoned node %s", nodeA)
	}
	f.names = append(f.names, "after-cordon")
}

// httpGet is one GET of http://addr/ and its body.
func httpGet(addr string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
	}}
	return testutil.Get(c, "/")
}
