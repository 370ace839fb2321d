// Package cluster starts a one-node Kubernetes cluster for tests: the
// kube-apiserver and etcd (through envtest), kube-controller-manager and
// kube-scheduler on this machine's loopback, and a kubelet with containerd,
// runc and the CNI plugins inside the Debian node VM (internal/nodevm),
// systemd as its PID 1: the shape of a user's node. Images come from
// tarballs imported into containerd; no registry is reachable.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/frontproxy"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// NodeName is the VM's hostname and its Node's name.
const NodeName = nodevm.Hostname

// serviceIP is the kubernetes Service's ClusterIP (the first address of
// envtest's service range): pods reach the API server there.
var serviceIP = net.IPv4(10, 0, 0, 1)

// Options configure a cluster.
type Options struct {
	// Images are image tarballs imported into the node's containerd.
	Images []string
	// Forward lists guest ports reachable from this machine's loopback.
	Forward []int
}

// Cluster is a running one-node cluster.
type Cluster struct {
	Env    *envtest.Environment
	Client client.Client
	// Kubeconfig is an admin kubeconfig file for kubectl.
	Kubeconfig string
	VM         *nodevm.VM
	// Setup says what Start spent its time on, for the suite's log.
	Setup []string
	dir   string
	procs []proc
}

// proc is a control-plane process and the channel closed when it exits.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start brings the cluster up and waits for its Node to be Ready.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	// Stopped through its own name: each failing return sets the result
	// to nil before this runs.
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.dir, err = os.MkdirTemp("", "unitlet-cluster-"); err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(c.dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		return nil, err
	}
	caPEM, err := pki(pkiDir, []net.IP{net.ParseIP(nodevm.GuestHostAddr), serviceIP})
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	// The guest boots while the control plane starts: the boot needs
	// nothing of it.
	started := time.Now()
	booted := nodevm.BootAsync(ctx, nodevm.Options{Forward: o.Forward, MemoryMiB: 3072})
	cpErr := c.startControlPlane(pkiDir, caPEM)
	c.took("control plane", started)
	vm, bootErr := booted()
	c.VM = vm
	c.took("node VM up", started)
	if cpErr != nil {
		return nil, cpErr
	}
	if bootErr != nil {
		return nil, bootErr
	}
	if err := c.joinNode(ctx, o.Images); err != nil {
		return nil, err
	}
	return c, nil
}

// took records how long a part of Start took since from.
func (c *Cluster) took(what string, from time.Time) {
	c.Setup = append(c.Setup, fmt.Sprintf("%s %s", what, time.Since(from).Round(100*time.Millisecond)))
}

func (c *Cluster) startControlPlane(pkiDir string, caPEM []byte) error {
	fp, err := frontproxy.Write(pkiDir)
	if err != nil {
		return err
	}
	assets := filepath.Join(testenv.RepoRoot(), "bin")
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return fmt.Errorf("%s missing in %s (run `make cluster-binaries`): %w", b, assets, err)
		}
	}
	env, cfg, err := testenv.StartEnvironment(func() *envtest.Environment {
		api := &envtest.APIServer{CertDir: pkiDir}
		api.SecureServing.CA = caPEM
		// The aggregator's trust, as a real control plane has it: the
		// relay (an aggregated API) authenticates the API server's
		// proxied requests with it.
		for k, v := range fp.APIServerFlags() {
			api.Configure().Set(k, v)
		}
		api.Configure().
			// The kubelet is authorized as a node, the agent by RBAC.
			Set("authorization-mode", "Node,RBAC").
			// envtest disables ServiceAccount admission (no controller
			// makes the default ServiceAccounts there); here one runs,
			// and pods need their projected tokens.
			Set("disable-admission-plugins", "StorageObjectInUseProtection").
			Set("enable-admission-plugins", "NodeRestriction").
			Set("service-account-issuer", "https://kubernetes.default.svc").
			Set("api-audiences", "https://kubernetes.default.svc")
		return &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
			ControlPlane:          envtest.ControlPlane{APIServer: api},
		}
	})
	if err != nil {
		return err
	}
	c.Env = env
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	admin, err := c.Env.AddUser(envtest.User{Name: "cluster-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	common := []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1"}
	if err := c.run("kube-controller-manager", append(common, "--secure-port=0",
		"--root-ca-file="+filepath.Join(pkiDir, "ca.crt"),
		"--service-account-private-key-file="+filepath.Join(pkiDir, "sa-signer.key"))...); err != nil {
		return err
	}
	port, err := testutil.FreeTCPPort()
	if err != nil {
		return err
	}
	return c.run("kube-scheduler", append(common, "--secure-port="+strconv.Itoa(port))...)
}

// run starts a control-plane binary from bin/, its log beside the pki.
func (c *Cluster) run(name string, args ...string) error {
	log, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.exited) }()
	c.procs = append(c.procs, p)
	return nil
}

// Log is the tail of a control-plane process's log
// (kube-controller-manager, kube-scheduler), for failures.
func (c *Cluster) Log(name string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	return testutil.Tail(string(b), lines)
}

// Stop powers the node off and stops the control plane.
func (c *Cluster) Stop() {
	if c.VM != nil {
		c.VM.Close()
	}
	for _, p := range c.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if c.Env != nil {
		_ = c.Env.Stop()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
