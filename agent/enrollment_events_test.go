package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"

	"github.com/unitlet/unitlet/runtime/join"
)

// TestApprovalNoticedAtOnce: with a poll an hour apart, approving the
// node's Enrollment still starts hosting at once, and taking the approval
// back stops it at once: the agent watches its own Enrollment, with the
// rights config/rbac grants it.
func TestApprovalNoticedAtOnce(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	// A state root the guard accepts: approval is all that is missing.
	if err := os.Chmod(opts.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	const node = "watch-node"
	a := startAgent(t, node, opts, func(j *joining) { j.every = time.Hour })
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	// The node's Lease is renewed from the start, approved or not.
	testutil.Eventually(t, "the node's Lease", waitLimit, pollEvery, testutil.Succeeds(func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "unitlet-system", Name: node}, l); err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > time.Minute || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, node+"/") {
			return errorf("lease %+v", l.Spec)
		}
		return nil
	}))

	setApproved(t, node, true)
	a.expectStage(t, http.StatusOK, join.StageHosting)
	setApproved(t, node, false)
	a.expectStage(t, http.StatusServiceUnavailable, join.StageApprovalRevoked)
	if err := a.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestHostingThatCannotStartStopsTheAgent: when the hosting reconcilers
// cannot be registered once the node may host, the agent stops with that
// cause rather than stay up hosting nothing.
func TestHostingThatCannotStartStopsTheAgent(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	if err := os.Chmod(opts.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	const node = "fatal-node"
	broken := errors.New("no node runtime")
	a := startAgent(t, node, opts, func(j *joining) {
		j.setupHosting = func(ctrl.Manager, Options) error { return broken }
	})
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	setApproved(t, node, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, err := a.get("/healthz"); err != nil {
			break // the probe server went with the manager
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent still serves 30s after hosting could not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.stop(); !errors.Is(err, broken) {
		t.Errorf("the agent stopped with %v, want %v", err, broken)
	}
}

// TestTwoAgentsOneNodeName: a second agent that claims a node name whose
// Lease another machine's agent renews hosts nothing and writes nothing
// of the Enrollment, saying why on /hostingz; once the first is gone and
// its Lease has run out, it takes the node over.
func TestTwoAgentsOneNodeName(t *testing.T) {
	needRoot(t)
	const node = "twin-node"
	first := flowRoots(t)
	if err := os.Chmod(first.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	first.HostEtc = testutil.HostEtc(t, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	a := startAgent(t, node, first)
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)
	setApproved(t, node, true)
	a.expectStage(t, http.StatusOK, join.StageHosting)

	second := flowRoots(t)
	second.HostEtc = testutil.HostEtc(t, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	b := startAgent(t, node, second)
	testutil.Eventually(t, "the second agent refuses the node", waitLimit, pollEvery, testutil.Succeeds(func() error {
		code, body, err := b.get("/hostingz")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "claimed by another agent") {
			return errorf("/hostingz %d %q %v", code, body, err)
		}
		return nil
	}))
	enr := &v1.Enrollment{}
	for range 5 {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, enr); err != nil {
			t.Fatal(err)
		}
		if enr.Status.MachineID != "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
			t.Fatalf("the second agent wrote the Enrollment: machine ID %q", enr.Status.MachineID)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if calls, accepting, _ := b.probe.state(); calls != 0 || accepting {
		t.Fatalf("the second agent hosts: %d setups, accepting %v", calls, accepting)
	}

	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the second agent takes the node over", waitLimit, pollEvery, testutil.Succeeds(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, enr); err != nil {
			return err
		}
		if enr.Status.MachineID != "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" {
			return errorf("machine ID %q", enr.Status.MachineID)
		}
		return nil
	}))
}
