// Package agent wires the node agent: flags, logging, the manager and its
// reconcilers. It holds no node logic of its own.
package agent

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/unitlet/unitlet/controllers/capacity"
	"github.com/unitlet/unitlet/controllers/hostgate"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/logflags"
	"github.com/unitlet/unitlet/runtime/boot"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/node"
)

// Backend names a unit backend.
const (
	BackendSystemd = "systemd"
	BackendDirect  = "direct"
	BackendAuto    = "auto"
)

// The agent's ports. It runs on the host network, so they are the node's:
// they sit beside the Kubernetes node components' rather than on :8080 and
// :8081, which other host-network agents often take.
//
//	10250  kubelet API
//	10256  kube-proxy health
//	10257  kube-controller-manager (secure)
//	10259  kube-scheduler (secure)
//	10260  unitlet agent API for the relay (--serve-address, agentapi.DefaultPort)
//	10261  unitlet agent metrics (--metrics-bind-address)
//	10262  unitlet agent /healthz, /readyz, /hostingz (--health-probe-bind-address)
const (
	DefaultMetricsPort = 10261
	DefaultProbePort   = 10262
)

// Options are the agent's flags; every later piece reads the same ones.
type Options struct {
	NodeName    string
	Kubeconfig  string
	StateRoot   string
	RunRoot     string
	CgroupRoot  string
	UnitBackend string
	// ShimBinary is the direct backend's per-unit helper ("" finds it:
	// see shimBinary).
	ShimBinary        string
	RequireEnrollment bool
	ProbeAddr         string
	MetricsAddr       string
	MetricsSecure     bool
	PprofAddr         string
	// ServeAddr is where `kubectl unitlet` reaches the agent ("0": not
	// served); AdvertiseAddr the host callers dial (see agent/endpoint).
	ServeAddr     string
	AdvertiseAddr string
	// RelayCANamespace holds ConfigMap unitlet-relay-ca, the CA of the
	// one caller the endpoint serves (the relay).
	RelayCANamespace string
	// Zap is the logger's configuration: controller-runtime's --zap-*
	// flags (--zap-log-level, --zap-devel, --zap-encoder,
	// --zap-stacktrace-level, --zap-time-encoding), as other controllers take.
	Zap zap.Options
	// APIQPS and APIBurst bound the agent's requests to the API server,
	// as the kubelet's --kube-api-qps and --kube-api-burst do.
	APIQPS   float32
	APIBurst int

	// SocketGroup owns the run dirs and sockets; the guard requires it.
	SocketGroup string
	// HostEtc is the node's /etc as the agent sees it: where the socket
	// group is looked up and created.
	HostEtc string
	// BootIDFile is where the node's boot ID is read; the agent records
	// it beside its state, and a change proves a reboot.
	BootIDFile string
	// LeaseNamespace holds the node's Lease ("" renews none).
	LeaseNamespace string
	// KeyNamespace holds the Instances' key Secrets, read one at a time
	// at each start.
	KeyNamespace string
	// AppIDs are the uids (and gids) given to Instances without a user.
	AppIDs identity.Range
	// LogMaxBytes and LogKeep rotate each Instance's log file: its size
	// before rotation, and how many rotated files are kept beside it.
	LogMaxBytes int64
	LogKeep     int
	// DiskPressurePercent: the Enrollment says DiskPressure=True while
	// less than this share of the state root's file system is free.
	DiskPressurePercent float64
	// Reserved is what the node keeps from Instances, as the kubelet's
	// --system-reserved: the Enrollment's allocatable leaves it out.
	Reserved corev1.ResourceList
	// Gate is not a flag: Run sets it before setupHosting, and the hosting
	// reconcilers consult it before they start new work.
	Gate hostgate.Gate
	// atExit is not a flag either: run sets it, setupHosting registers
	// the node runtime's close on it.
	atExit *atExit
}

// Parse reads the agent's flags from args.
func Parse(args []string) (Options, error) {
	host, _ := os.Hostname()
	var o Options
	fs := flag.NewFlagSet("unitlet", flag.ContinueOnError)
	fs.StringVar(&o.NodeName, "node-name", host, "the node this agent runs as; it hosts only Instances with this spec.nodeName")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration or $KUBECONFIG")
	fs.StringVar(&o.StateRoot, "state-root", "/var/lib/unitlet", "root of the Instances' data directories")
	fs.StringVar(&o.RunRoot, "run-root", "/run/unitlet", "root of the Instances' run directories and sockets")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", "unitlet", "cgroup (relative to the hierarchy root) under which Instances are placed")
	fs.StringVar(&o.UnitBackend, "unit-backend", BackendAuto, "how units are started: systemd, direct or auto (systemd when its bus answers)")
	fs.StringVar(&o.ShimBinary, "shim-binary", "", "the per-unit helper every unit runs (trampoline; the direct backend's shim; systemd's exit record); empty: unitlet-shim beside this binary, else this binary itself")
	fs.BoolVar(&o.RequireEnrollment, "require-enrollment", true, "host nothing until this node's Enrollment is approved and its guard armed")
	fs.StringVar(&o.SocketGroup, "socket-group", "unitlet", "group that owns the Instances' run dirs and sockets (a proxy in it can connect)")
	fs.StringVar(&o.HostEtc, "host-etc", "/etc", "the node's /etc as the agent sees it (its user and group database); in a container, the host's /etc mounted there")
	fs.StringVar(&o.BootIDFile, "boot-id-file", boot.DefaultSource, "the node's boot ID; recorded beside the state root, a change since the agent last ran proves every process of the old boot gone")
	fs.StringVar(&o.KeyNamespace, "key-namespace", "unitlet-keys", "namespace of the Instances' key Secrets (unitlet cluster's --key-namespace)")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", "unitlet-system", "namespace of the node's Lease, renewed every 10 s for nodewatch (empty renews none)")
	o.AppIDs = identity.DefaultRange
	o.LogMaxBytes = node.DefaultLogMaxBytes
	fs.Func("instance-log-max-size", "size of an Instance's log file before it is rotated, as a quantity (default 8Mi)", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() < 1024 {
			return fmt.Errorf("want a size of at least 1Ki, like 8Mi (got %q)", v)
		}
		o.LogMaxBytes = q.Value()
		return nil
	})
	fs.IntVar(&o.LogKeep, "instance-log-keep", 3, "rotated files kept beside an Instance's current log file (kubectl unitlet logs reads them all)")
	fs.Func("app-ids", "FIRST-LAST: the uids (and equal gids) reserved for Instances without a user, each its own; no user or group of the node may be in it (default "+identity.DefaultRange.String()+")", func(v string) (err error) {
		o.AppIDs, err = identity.ParseRange(v)
		return err
	})
	fs.Float64Var(&o.DiskPressurePercent, "disk-pressure-free-percent", 5, "the node's Enrollment says DiskPressure=True while less than this percentage of the state root's file system is free")
	fs.Func("reserved", "what the node keeps from Instances, as the kubelet's --system-reserved: e.g. memory=512Mi,cpu=500m,pids=1000 (any of the three); the Enrollment's allocatable leaves it out", func(v string) (err error) {
		o.Reserved, err = capacity.ParseReserve(v)
		return err
	})
	fs.Func("kube-api-qps", "an operator's cap on the requests per second the agent's whole client sends the API server, one bucket with --kube-api-burst (default 0: none, the API server's Priority and Fairness is the budget; see config/flowcontrol)", func(v string) error {
		q, err := strconv.ParseFloat(v, 32)
		if err != nil || q < 0 {
			return fmt.Errorf("want 0 (no cap) or a positive number, got %q", v)
		}
		o.APIQPS = float32(q)
		return nil
	})
	fs.IntVar(&o.APIBurst, "kube-api-burst", 100, "requests the agent may send at once above --kube-api-qps (the kubelet's default)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", fmt.Sprintf(":%d", DefaultProbePort), "address of the /healthz, /readyz and /hostingz endpoints")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", fmt.Sprintf(":%d", DefaultMetricsPort), "address of the metrics endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (GET /metrics); false serves plain HTTP")
	fs.StringVar(&o.ServeAddr, "serve-address", fmt.Sprintf(":%d", agentapi.DefaultPort), "address of the HTTPS endpoint the relay reaches for kubectl unitlet logs and run (mutual TLS: only the relay's client certificate is served); 0 disables it")
	fs.StringVar(&o.RelayCANamespace, "relay-ca-namespace", "unitlet-system", "namespace of ConfigMap unitlet-relay-ca, the CA (ca.crt) of the relay's client certificate, the endpoint's one caller")
	fs.StringVar(&o.AdvertiseAddr, "advertise-address", "", "host the node's Enrollment publishes for that endpoint (in a DaemonSet, the node's IP); empty: the serve address's host, else the node's first global address")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints (unauthenticated: loopback only); empty disables them")
	logflags.Bind(fs, &o.Zap)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.LogKeep < 1 {
		return o, fmt.Errorf("--instance-log-keep=%d: want 1 or more", o.LogKeep)
	}
	if o.DiskPressurePercent < 0 || o.DiskPressurePercent > 100 {
		return o, fmt.Errorf("--disk-pressure-free-percent=%g: want 0 to 100", o.DiskPressurePercent)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, o.Validate()
}

// Validate refuses options the agent cannot run with.
func (o Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is empty and the hostname is unknown"))
	}
	switch o.UnitBackend {
	case BackendSystemd, BackendDirect, BackendAuto:
	default:
		errs = append(errs, fmt.Errorf("--unit-backend=%q: want systemd, direct or auto", o.UnitBackend))
	}
	if o.ShimBinary != "" && o.ShimBinary[0] != '/' {
		errs = append(errs, fmt.Errorf("--shim-binary=%q must be an absolute path", o.ShimBinary))
	}
	for flagName, p := range map[string]string{"--state-root": o.StateRoot, "--run-root": o.RunRoot, "--host-etc": o.HostEtc, "--boot-id-file": o.BootIDFile} {
		if p == "" || p[0] != '/' {
			errs = append(errs, fmt.Errorf("%s=%q must be an absolute path", flagName, p))
		}
	}
	if o.CgroupRoot == "" {
		errs = append(errs, errors.New("--cgroup-root is empty"))
	}
	return errors.Join(errs...)
}
