package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/go-logr/logr"
	godbus "github.com/godbus/dbus/v5"

	"github.com/unitlet/unitlet/agent/selfinstall"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/dbusconn"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/join"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/units"
)

// proofBudget bounds one proof that a unit is gone.
const proofBudget = 30 * time.Second

// newRuntime composes the node runtime for opts, choosing the unit
// backend: systemd when asked or, for auto, when its bus answers.
func newRuntime(opts Options, log logr.Logger) (*node.Node, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("own executable: %w", err)
	}
	lay := layout.Layout{StateRoot: opts.StateRoot, RunRoot: opts.RunRoot, CgroupRoot: opts.CgroupRoot}
	name := opts.UnitBackend
	if name == BackendAuto {
		name = BackendDirect
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if conn, err := systemBus(ctx); err == nil {
			conn.Close()
			name = BackendSystemd
		}
		cancel()
	}
	// Every unit's own processes (trampoline, shim, exit record) run the
	// small helper: they are charged to the app's tier.
	shimExe, err := shimBinary(opts.ShimBinary, exe, log)
	if err != nil {
		return nil, "", err
	}
	var backend units.Backend
	switch name {
	case BackendSystemd:
		backend, err = units.NewSystemd(units.SystemdConfig{
			Connect: systemBus, Signals: systemBusSignals, Exe: shimExe, ProofBudget: proofBudget,
			CgroupDirs: hostCgroupDirs(log), Layout: lay, Log: log.WithName("systemd"),
		})
	default:
		backend, err = units.NewDirect(units.DirectConfig{
			Layout: lay, Exe: shimExe, ProofBudget: proofBudget, Log: log.WithName("direct"),
		})
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s backend: %w", name, err)
	}
	n, err := node.New(node.Config{
		Layout: lay, Backend: backend, SocketGID: socketGID(join.GroupDB{Dir: opts.HostEtc}, opts.SocketGroup, log),
		Users: identity.Users{Dir: opts.HostEtc}, IDs: opts.AppIDs, Log: log,
		LogMaxBytes: opts.LogMaxBytes, LogKeep: opts.LogKeep,
		LogDropped: func(inst node.InstanceRef, reason string) {
			metrics.LogLineDropped(inst.Namespace, inst.Name, reason)
		},
	})
	return n, name, err
}

// systemBus and systemBusSignals connect to systemd on the system bus;
// each connection lives until the backend closes it, whatever call first
// needed it.
func systemBus(ctx context.Context) (*sddbus.Conn, error) { return dbusconn.Systemd(ctx, "") }

func systemBusSignals(ctx context.Context) (*godbus.Conn, error) { return dbusconn.Dial(ctx, "") }

// ShimName is the per-unit helper's file name, looked for beside the
// agent's binary.
const ShimName = selfinstall.ShimName

// shimBinary is the binary each unit runs as its trampoline (and, on the
// direct backend, its shim; on systemd, its exit record): the one asked
// for (which must exist), else unitlet-shim beside the agent's own binary,
// else the agent's binary itself (it has the same roles, but each start
// then pays the agent's ~40 MiB and package inits inside the app's tier,
// which is logged).
func shimBinary(asked, self string, log logr.Logger) (string, error) {
	if asked != "" {
		if _, err := os.Stat(asked); err != nil {
			return "", fmt.Errorf("--shim-binary: %w", err)
		}
		return asked, nil
	}
	beside := filepath.Join(filepath.Dir(self), ShimName)
	if _, err := os.Stat(beside); err == nil {
		return beside, nil
	}
	log.Info("no "+ShimName+" beside the agent: its own binary serves as every unit's trampoline and shim, at ~40 MiB more inside each app's tier while it starts", "looked", beside)
	return self, nil
}

// socketGID is the socket group's id, or -1 (root keeps the run dirs)
// when it cannot be resolved; the guard reports that case.
func socketGID(db join.GroupDB, group string, log logr.Logger) int {
	gid, err := db.Resolve(group)
	if err != nil {
		log.Info("socket group not resolved: run dirs stay root's; a proxy must run as root to connect", "group", group, "err", err.Error())
	}
	return gid
}

// hostCgroupDirs maps a cgroup as systemd names it to its directory in
// every hierarchy mounted on this host, all of which must be empty for a
// kill to be proven. The mounts are read once; when they cannot be, it
// maps to nothing, and the backend then proves nothing.
func hostCgroupDirs(log logr.Logger) func(cgroup string) []string {
	mounts, err := cgroups.HierarchyMounts(cgroups.DefaultMountRoot)
	if err != nil {
		log.Error(err, "cgroup hierarchies unreadable: no kill can be proven")
	}
	return func(cgroup string) []string {
		dirs := make([]string, 0, len(mounts))
		for _, m := range mounts {
			dirs = append(dirs, filepath.Join(m, cgroup))
		}
		return dirs
	}
}
