// Package fleet runs a fleet against one real API server: three real
// agents on this machine (the unitlet binary, direct backend, enrollment
// required, each its own node name, roots, cgroup root and Lease), the
// node VM's agent (systemd as PID 1, the DaemonSet's arguments) and the
// cluster side (`unitlet cluster`: nodewatch, placement, moves, instance
// keys). It places unpinned Instances, drains a node under load through a
// front end that routes by status, loses a node and brings it back, and
// follows the instance key across moves and onto the VM (its reboot is
// test/node's).
package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

var (
	env        *testenv.Env
	k8s        client.Client
	kubeconfig string
	adminRaw   []byte
	runID      = strconv.Itoa(os.Getpid())
	// clusterLog is the cluster side's output, shown when a step fails.
	clusterLog string
)

const (
	pollEvery = 100 * time.Millisecond
	leaseNS   = "unitlet-system"
	keyNS     = "unitlet-keys"
	ns        = testutil.Namespace
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The router's informer logs through controller-runtime: quiet here.
	ctrllog.SetLogger(logr.Discard())
	if _, err := testutil.Preflight("fleet", "the agents create cgroups"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	dir, err := os.MkdirTemp("", "unitlet-fleet-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := writeKubeconfig(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, name := range []string{leaseNS, keyNS} {
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// The VM boots while the suite starts; the first step waits for it.
	go bootVM(adminRaw)
	defer func() {
		<-vmReady
		if vm != nil {
			vm.Close()
		}
	}()
	stop, err := startClusterSide(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}

func writeKubeconfig(dir string) error {
	user, err := env.AddUser(envtest.User{Name: "fleet-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig, adminRaw = filepath.Join(dir, "admin.kubeconfig"), raw
	return os.WriteFile(kubeconfig, raw, 0o600)
}

// startClusterSide runs unitlet-cluster as config/default has it
// (leader election on, so a second replica would wait), with a short
// settle for the moves.
func startClusterSide(dir string) (stop func(), err error) {
	clusterLog = filepath.Join(dir, "cluster.log")
	logf, err := os.Create(clusterLog)
	if err != nil {
		return nil, err
	}
	probe, err := testutil.FreeTCPPort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(testutil.ClusterBinary(), "--kubeconfig", kubeconfig,
		"--lease-namespace", leaseNS, "--key-namespace", keyNS, "--move-settle", "2s", "--leader-elect",
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(probe))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start unitlet-cluster: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); logf.Close() }()
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}

// clusterTail is the cluster side's last n log lines.
func clusterTail(n int) string {
	b, err := os.ReadFile(clusterLog)
	if err != nil {
		return err.Error()
	}
	return testutil.Tail(string(b), n)
}
