// Package relayproc runs the relay (`unitlet relay`) as a process beside
// a test's API server, registered as the aggregated API it is in a
// cluster, so `kubectl unitlet` reaches agents the way users' does.
package relayproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/cluster/relay"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// Namespace is where the relay keeps its CA, as config/default has it
// (the agents' --relay-ca-namespace default).
const Namespace = "unitlet-system"

// Register points the relay's APIService at port on this machine's
// loopback. The API server runs here, outside any cluster network: a
// Service of type ExternalName "localhost" makes it dial localhost at
// the APIService's port (aggregator routing off), and it still verifies
// the relay's certificate for the Service's DNS name, as in a cluster,
// where the Service selects the relay's Pods instead.
func Register(ctx context.Context, c client.Client, port int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: relay.ServiceName},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": relay.APIServiceName},
		"spec": map[string]any{
			"group": relay.Group, "version": relay.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": Namespace, "name": relay.ServiceName, "port": int64(port)},
		},
	}}
	for _, obj := range []client.Object{ns, svc, apiService} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("relay registration: %w", err)
		}
	}
	return nil
}

// Relay is one relay process.
type Relay struct {
	Cmd     *exec.Cmd
	LogPath string
}

// Start registers and starts bin/unitlet-cluster relay with kubeconfig (an
// administrator's: the relay's own RBAC is config/relay's, tested in
// test/cluster), its log in logPath, and waits until the API server
// serves its group. Stop ends it.
func Start(ctx context.Context, c client.Client, cfg *rest.Config, kubeconfig, logPath string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := Register(ctx, c, port); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r := &Relay{LogPath: logPath}
	r.Cmd = exec.Command(testutil.ClusterBinary(), "relay", "--kubeconfig", kubeconfig,
		"--listen", "127.0.0.1:"+strconv.Itoa(port), "--namespace", Namespace)
	r.Cmd.Stdout, r.Cmd.Stderr = logf, logf
	if err := r.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		r.Stop()
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := dc.ServerResourcesForGroupVersion(relay.Group + "/" + relay.Version)
		if err == nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			r.Stop()
			return nil, fmt.Errorf("the relay's group not served through the API server after a minute: %w; relay log:\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends the relay.
func (r *Relay) Stop() {
	_ = r.Cmd.Process.Kill()
	_ = r.Cmd.Wait()
}
