// Package cluster deploys unitlet the way an operator installs a release:
// the agent image's OCI archive imported into the node's containerd and
// named by the digest install.yaml pins, then `kubectl apply -f
// install.yaml` (the release make test-release-dist cuts), on a one-node
// cluster whose kubelet, containerd and runc run in the Debian node VM
// (internal/testkit/cluster), with systemd as the node's PID 1.
package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/internal/testkit/cluster"
	"github.com/unitlet/unitlet/internal/testkit/release"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
)

// frontPort is nginx's port in the guest.
const frontPort = 8088

// pollEvery is how often waits look again.
const pollEvery = 500 * time.Millisecond

var (
	// rel is the release installed.
	rel  release.Release
	c    *cluster.Cluster
	k8s  client.Client
	kube testutil.API
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "test/cluster:", err); return 1 }
	if os.Geteuid() != 0 {
		return fail(fmt.Errorf("must run as root (it boots a VM)"))
	}
	var err error
	rel, err = release.Find()
	if err != nil {
		return fail(err)
	}
	images := []string{rel.Image}
	for _, img := range []string{"pause-image.tar"} {
		p := filepath.Join(testenv.RepoRoot(), "bin", img)
		if _, err := os.Stat(p); err != nil {
			return fail(fmt.Errorf("%s missing: run `make image`", p))
		}
		images = append(images, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	started := time.Now()
	c, err = cluster.Start(ctx, cluster.Options{Images: images, Forward: []int{frontPort, relayPort}})
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	if err := tinyapp.Install(ctx, c.VM); err != nil {
		return fail(err)
	}
	testutil.Report("test/cluster", fmt.Sprintf("control plane, node VM (%s) and kubelet Ready in %s: %s",
		c.VM.HowBooted(), time.Since(started).Round(time.Second), strings.Join(c.Setup, ", ")))
	k8s = c.Client
	kube = testutil.API{Client: k8s, Every: pollEvery}
	code := m.Run()
	if code != 0 {
		for _, p := range []string{"kube-controller-manager", "kube-scheduler"} {
			fmt.Fprintf(os.Stderr, "test/cluster: %s's log:\n%s\n", p, c.Log(p, 30))
		}
		for _, s := range []string{"journalctl -u kubelet --no-pager -n 60 -o cat", "ctr -n k8s.io containers ls 2>&1 || true",
			// Why each generation was made, and each key minted.
			"grep -h 'generation created\\|instance key' /var/log/pods/unitlet-system_*/*/*.log | tail -120 || true"} {
			out, _ := c.VM.Run(context.Background(), s)
			fmt.Fprintf(os.Stderr, "test/cluster: %s:\n%s\n", s, out)
		}
	}
	if out, err := c.VM.CPUSpent(context.Background()); err == nil {
		testutil.Report("test/cluster", out)
	}
	fmt.Printf("test/cluster: everything took %s\n", time.Since(started).Round(time.Second))
	return code
}
