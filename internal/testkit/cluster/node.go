package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// The node's configuration: containerd with runc under systemd's cgroup
// driver (the kubelet's, on a systemd node), the sandbox image imported
// from a tarball, the Debian CNI plugins' bridge.
const (
	containerdConfig = `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "unitlet.dev/pause:dev"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`
	cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
	kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
readOnlyPort: 0
resolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard: {memory.available: "50Mi", nodefs.available: "2%", imagefs.available: "2%"}
`
)

// joinNode configures the guest's container runtime and kubelet, imports
// the images, and waits for the Node to be Ready.
func (c *Cluster) joinNode(ctx context.Context, images []string) error {
	start := time.Now()
	node, err := c.Env.AddUser(envtest.User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return err
	}
	kc, err := node.KubeConfig()
	if err != nil {
		return err
	}
	// The serving certificate names the guest's view of the API server
	// and envtest put its CA in the kubeconfig: only the address changes.
	if kc, err = nodevm.GuestKubeconfig(kc, ""); err != nil {
		return err
	}
	kubelet, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bin", "kubelet"))
	if err != nil {
		return err
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{"/etc/containerd/config.toml", []byte(containerdConfig), 0o644},
		{"/etc/cni/net.d/10-pods.conflist", []byte(cniConfig), 0o644},
		{"/etc/kubernetes/kubelet.yaml", []byte(kubeletConfig), 0o644},
		{"/etc/kubernetes/kubelet.kubeconfig", kc, 0o600},
		{"/usr/local/bin/kubelet", kubelet, 0o755},
	}
	for _, f := range files {
		if err := c.VM.WriteFile(ctx, f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	c.took("files copied", start)
	start = time.Now()
	if _, err := c.VM.Run(ctx, "systemctl start containerd"); err != nil {
		return err
	}
	c.took("containerd started", start)
	for _, img := range images {
		start = time.Now()
		b, err := os.ReadFile(img)
		if err != nil {
			return err
		}
		name := "/var/tmp/" + filepath.Base(img)
		if err := c.VM.WriteFile(ctx, name, b, 0o644); err != nil {
			return err
		}
		if _, err := c.VM.Run(ctx, "ctr -n k8s.io images import "+name+" && rm "+name); err != nil {
			return err
		}
		c.took(filepath.Base(img)+" copied and imported", start)
	}
	start = time.Now()
	// kube-proxy's part, by hand: the kubernetes Service's ClusterIP leads
	// to the API server on this machine's loopback, which the guest sees
	// at GuestHostAddr. Nothing else of Services is used.
	u, err := url.Parse(c.Env.Config.Host)
	if err != nil {
		return err
	}
	port := u.Port()
	if _, err := c.VM.Run(ctx, fmt.Sprintf(
		"iptables -t nat -A PREROUTING -d %s -p tcp --dport 443 -j DNAT --to-destination %s:%s && "+
			"iptables -t nat -A OUTPUT -d %s -p tcp --dport 443 -j DNAT --to-destination %s:%s",
		serviceIP, nodevm.GuestHostAddr, port, serviceIP, nodevm.GuestHostAddr, port)); err != nil {
		return err
	}
	if _, err := c.VM.Run(ctx, "systemd-run --unit=kubelet --property=Restart=always /usr/local/bin/kubelet "+
		"--config=/etc/kubernetes/kubelet.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig "+
		"--hostname-override="+NodeName+" --node-ip=10.0.2.15 --v=1"); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	c.took("kubelet started and the Node Ready", start)
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := "no Node"
	for time.Now().Before(deadline) {
		var n corev1.Node
		if err := c.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &n); err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = cond.Reason + ": " + cond.Message
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	out, _ := c.VM.Run(ctx, "journalctl -u kubelet --no-pager -n 40 -o cat")
	return fmt.Errorf("node %s not Ready after %s (%s); kubelet:\n%s", NodeName, limit, last, out)
}
