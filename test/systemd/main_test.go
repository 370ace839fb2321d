// Package systemd runs the reconcilers against a real API server and the
// systemd unit backend, with a real systemd booted in private namespaces
// (internal/systemdboot): the flows of test/e2e, but every generation is a
// transient systemd service in an instance slice.
package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/systemdboot"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/units"
)

// testNode is the node name the reconcilers run as.
const testNode = "systemd-node"

// rootPrefix starts the roots this package creates; the pid follows, so a
// later run sweeps only the leftovers of runs that are gone.
const (
	stateRootPrefix = "/var/lib/unitlet-test-systemd-"
	// The run root holds sockets: short, and outside /tmp, which is
	// private inside the namespace.
	runRootPrefix = "/dev/shm/ulsd-"
)

// How often this package's waits look again, and how long an update (its
// conflicts retried) and a delete (every unit proven gone) may take.
const (
	pollEvery   = 100 * time.Millisecond
	updateLimit = 10 * time.Second
	deleteLimit = 90 * time.Second
)

// stopGrace matches the agent's: a retiring generation's SIGTERM-to-kill.
const stopGrace = 10 * time.Second

var (
	env *testenv.Env
	k8s client.Client
	// kube is how the tests read and change objects; set with k8s.
	kube testutil.API
	sys  *systemdboot.System
	lay  layout.Layout
	// unitExe is the helper the units run, as on a node (a copy the namespace
	// sees).
	unitExe string
	// rt is the node runtime the reconcilers drive, for what the agent's
	// endpoint asks of it directly (a run).
	rt *node.Node
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	exe, err := testutil.Preflight("test/systemd", "it boots systemd and creates cgroups")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sweepRoots()
	pid := strconv.Itoa(os.Getpid())
	lay = layout.Layout{StateRoot: stateRootPrefix + pid, RunRoot: runRootPrefix + pid, CgroupRoot: "unitlet"}
	for _, d := range []string{lay.StateRoot, lay.RunRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(d)
	}

	// systemd's namespace has a private /tmp: a checkout there (as CI's
	// may be) would leave bin/unitlet-shim out of its sight, so the units run a
	// copy kept beneath the state root, which the namespace shares.
	if exe, err = copyExecutable(testutil.ShimBinary(), filepath.Join(lay.StateRoot, "unitlet-shim")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	kube = testutil.API{Client: k8s, Every: pollEvery}
	// The cluster side's key minter, as `unitlet cluster` runs it: no
	// Instance makes a generation without its key.
	keyCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	if err := keyminter.Start(keyCtx, env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	bootCtx, cancelBoot := context.WithTimeout(context.Background(), 30*time.Second)
	sys, err = systemdboot.Start(bootCtx, systemdboot.Options{Writable: []string{lay.StateRoot, lay.RunRoot}})
	cancelBoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := sys.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "tear down systemd:", err)
		}
	}()

	unitExe = exe
	if bus, err = startBusProxy(lay.RunRoot, sys.BusSocket()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := stderrLogger()
	ctrl.SetLogger(log) // what controller-runtime's clients log, too
	rt, err = newRuntime(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer rt.Close()

	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startReconcilers(ctx, rt, log)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Stop the reconcilers before the runtime and systemd go.
	defer func() { cancel(); <-stopped }()
	return m.Run()
}

// newRuntime is the agent's node runtime over the booted systemd: a
// backend with a bus connection of its own, and a Node over the roots.
// Closing the Node closes the backend, as an agent's exit does.
func newRuntime(log logr.Logger) (*node.Node, error) {
	backend, err := units.NewSystemd(units.SystemdConfig{
		Connect: bus.connect, Signals: sys.Bus, Exe: unitExe, CgroupDirs: hostCgroupDirs, ProofBudget: 30 * time.Second,
		Layout: lay, Log: log.WithName("systemd"),
	})
	if err != nil {
		return nil, err
	}
	rt, err := node.New(node.Config{Layout: lay, Backend: backend, SocketGID: -1,
		Log: log.WithName("runtime")})
	if err != nil {
		backend.Close()
		return nil, err
	}
	return rt, nil
}

// startReconcilers runs both reconcilers for testNode in a manager, set up
// as the agent's hosting mode sets them up. stopped closes once the
// manager has returned.
func startReconcilers(ctx context.Context, rt node.Runtime, log logr.Logger) (<-chan struct{}, error) {
	onNode := fields.OneTermEqualSelector(v1.FieldNodeName, testNode)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme.New(),
		Logger:  log.WithName("manager"),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&v1.Instance{}: {Field: onNode}, &v1.Generation{}: {Field: onNode},
		}},
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.SetupHosting(mgr, controllers.Hosting{
		Runtime: rt, NodeName: testNode, Recorder: mgr.GetEventRecorder("unitlet-agent"), Grace: stopGrace,
	}); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return stopped, nil
}

// hostCgroupDirs maps a cgroup as the booted systemd names it to its host
// directory in every hierarchy: all must be empty for a kill's proof.
func hostCgroupDirs(cgroup string) []string {
	var dirs []string
	for h := range sys.CgroupPaths() {
		dirs = append(dirs, sys.HostCgroup(h, cgroup))
	}
	return dirs
}

// stderrLogger writes the reconcilers' and runtime's logs to stderr when
// UNITLET_TEST_LOG is set; otherwise only errors.
func stderrLogger() logr.Logger {
	verbose := os.Getenv("UNITLET_TEST_LOG") != ""
	return funcr.New(func(prefix, args string) {
		if verbose || strings.Contains(args, `"error"`) {
			fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), prefix, args)
		}
	}, funcr.Options{})
}

// sweepRoots removes the roots of earlier runs whose process is gone.
func sweepRoots() {
	for _, prefix := range []string{stateRootPrefix, runRootPrefix} {
		matches, _ := filepath.Glob(prefix + "*")
		for _, d := range matches {
			pid, err := strconv.Atoi(strings.TrimPrefix(d, prefix))
			if err != nil || pid <= 0 {
				continue
			}
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				continue
			}
			_ = os.RemoveAll(d)
		}
	}
}

// copyExecutable copies the binary at src to dst, executable.
func copyExecutable(src, dst string) (string, error) {
	raw, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(dst, raw, 0o755); err != nil {
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	return dst, nil
}
