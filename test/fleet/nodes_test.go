package fleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// allocatableMemory is what each node of the suite offers Instances: the
// machine's memory less a reserve, so that every node of this one machine
// has the same, small capacity and placement has to share it out.
const allocatableMemory = 7 << 30

// node is one agent of the fleet and the labels of its Enrollment.
type node struct {
	*agentproc.Agent
	labels map[string]string
}

// startNode runs an agent as name with the DaemonSet's choices
// (enrollment required, its Lease) and a reserve that leaves
// allocatableMemory, approves and labels its Enrollment, and waits until
// it hosts. The agent lives until root ends.
func startNode(t, root *testing.T, name string, labels map[string]string) *node {
	t.Helper()
	a := agentproc.New(root, name, runID, kubeconfig)
	reserve := machineMemory(t) - allocatableMemory
	if reserve < 0 {
		t.Fatalf("the suite gives each of its three nodes %d MiB of this machine's %d MiB for Instances: too little memory here",
			allocatableMemory>>20, machineMemory(t)>>20)
	}
	a.Args = []string{"--require-enrollment=true", "--lease-namespace", leaseNS,
		"--reserved", "memory=" + strconv.FormatInt(reserve, 10)}
	n := &node{Agent: a, labels: labels}
	root.Cleanup(func() {
		a.Stop(syscall.SIGTERM)
		if root.Failed() {
			t.Logf("agent %s log (tail):\n%s", name, a.LogTail(40))
		}
		a.Sweep(root)
	})
	a.Start(root)
	approve(t, name, labels)
	a.WaitReady(t, 90*time.Second)
	waitHosting(t, name, time.Minute)
	return n
}

// waitHosting waits until node's Enrollment says it hosts and what it
// offers.
func waitHosting(t *testing.T, node string, limit time.Duration) {
	t.Helper()
	testutil.Eventually(t, "Enrollment "+node+" hosting with its capacity", limit, pollEvery, func() (bool, string) {
		enr := enrollment(t, node)
		if enr.Status.Mode != v1.ModeHosting || enr.Status.Allocatable.Memory().IsZero() {
			return false, fmt.Sprintf("mode %q, allocatable %v", enr.Status.Mode, enr.Status.Allocatable)
		}
		return true, ""
	})
}

// approve approves and labels node's Enrollment once its agent made it.
func approve(t *testing.T, node string, labels map[string]string) {
	t.Helper()
	testutil.Eventually(t, "Enrollment "+node+" approved", 3*time.Minute, pollEvery, testutil.Succeeds(func() error {
		var enr v1.Enrollment
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, &enr); err != nil {
			return err
		}
		patch := client.MergeFrom(enr.DeepCopy())
		enr.Spec.Approved = true
		if enr.Labels == nil {
			enr.Labels = map[string]string{}
		}
		for k, v := range labels {
			enr.Labels[k] = v
		}
		return k8s.Patch(context.Background(), &enr, patch)
	}))
}

func enrollment(t *testing.T, name string) *v1.Enrollment {
	t.Helper()
	enr := &v1.Enrollment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, enr); err != nil {
		t.Fatalf("enrollment %s: %v", name, err)
	}
	return enr
}

// machineMemory is MemTotal in bytes.
func machineMemory(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}
