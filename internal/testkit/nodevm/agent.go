package nodevm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/unitlet/unitlet/agent/selfinstall"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// Where the agent lives in the guest: the binary where the DaemonSet's
// init container copies it, credentials where a kubelet-less service
// would keep them.
const (
	AgentBinary     = "/var/lib/unitlet/bin/unitlet"
	AgentKubeconfig = "/etc/unitlet/kubeconfig"
	AgentService    = "unitlet-agent.service"
)

// Agent is how the shipped DaemonSet runs the agent on a node: its
// arguments, the host paths it mounts at another path ("host:container"),
// and its probe port.
type Agent struct {
	Args, Binds []string
	ProbePort   int
}

// DaemonSetAgent reads the agent container of config/manager/daemonset.yaml
// with $(NODE_NAME) as the kubelet would expand it for node.
func DaemonSetAgent(node string) (Agent, error) {
	var a Agent
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "daemonset.yaml"))
	if err != nil {
		return a, err
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		return a, fmt.Errorf("config/manager/daemonset.yaml: %w", err)
	}
	hostPaths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "agent" {
			continue
		}
		for _, arg := range c.Args {
			arg = strings.ReplaceAll(arg, "$(NODE_NAME)", node)
			if v, ok := strings.CutPrefix(arg, "--health-probe-bind-address=:"); ok {
				a.ProbePort, _ = strconv.Atoi(v)
			}
			a.Args = append(a.Args, arg)
		}
		for _, m := range c.VolumeMounts {
			if h, ok := hostPaths[m.Name]; ok && h != m.MountPath {
				a.Binds = append(a.Binds, h+":"+m.MountPath)
			}
		}
	}
	if len(a.Args) == 0 || a.ProbePort == 0 {
		return a, fmt.Errorf("no agent container with a probe port in config/manager/daemonset.yaml")
	}
	return a, nil
}

// InstallAgent puts exe (and the helper beside it) and kubeconfig in the guest and starts the agent
// as a service with a's arguments (extra follow them: a flag given again
// wins). Restart=always stands in for the kubelet restarting a container.
func (v *VM) InstallAgent(ctx context.Context, exe string, kubeconfig []byte, a Agent, extra ...string) error {
	bin, err := os.ReadFile(exe)
	if err != nil {
		return err
	}
	if err := v.WriteFile(ctx, AgentBinary, bin, 0o755); err != nil {
		return err
	}
	// The helper beside exe goes beside the agent, as `unitlet install`
	// puts the image's there.
	if shim, err := os.ReadFile(filepath.Join(filepath.Dir(exe), selfinstall.ShimName)); err == nil {
		if err := v.WriteFile(ctx, filepath.Join(filepath.Dir(AgentBinary), selfinstall.ShimName), shim, 0o755); err != nil {
			return err
		}
	}
	if err := v.WriteFile(ctx, AgentKubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	// The container's view of host paths mounted elsewhere is the
	// service's own mount namespace; everything it hands systemd stays a
	// host path, as in the pod.
	binds := ""
	for _, b := range a.Binds {
		binds += "BindPaths=" + b + "\n"
	}
	unit := fmt.Sprintf(`[Unit]
Description=unitlet agent, as the DaemonSet runs it
After=network-online.target dbus.service
StartLimitIntervalSec=0

[Service]
ExecStart=%s %s --kubeconfig=%s
%sRestart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
`, AgentBinary, strings.Join(append(append([]string{}, a.Args...), extra...), " "), AgentKubeconfig, binds)
	if err := v.WriteFile(ctx, "/etc/systemd/system/"+AgentService, []byte(unit), 0o644); err != nil {
		return err
	}
	_, err = v.Run(ctx, "systemctl daemon-reload && systemctl enable --now "+AgentService)
	return err
}
