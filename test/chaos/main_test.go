// Package chaos drives real agents (the unitlet binary, direct backend,
// enrollment required) against a real API server and injects faults: the
// agent killed with SIGKILL at random points of create/swap/suspend/delete
// cycles, the API server out of reach, a kill that cannot finish, a full
// disk under the state root, a second agent claiming the node's name.
// After every step an invariant checker compares what the API says with
// what the node holds, and the suite ends with a report.
//
// The run is seeded: CHAOS_SEED replays one (the seed is printed).
// CHAOS_CYCLES (default 30) and CHAOS_OUTAGE (default 10s) size it; `make
// chaos` runs 240 cycles and a 60 s outage.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

var (
	env  *testenv.Env
	k8s  client.Client
	kube testutil.API
	// adminConfig is a kubeconfig of the API server itself; agents reach
	// it through apiCut (agentConfig) so an outage can be staged.
	adminConfig, agentConfig string
	apiCut                   *cutProxy
	runID                    = strconv.Itoa(os.Getpid())

	seed    uint64
	cycles  = 30
	outage  = 10 * time.Second
	tally   = &report{}
	started = time.Now()
)

const (
	pollEvery = 50 * time.Millisecond
	// settleLimit bounds how long one step may take to settle.
	settleLimit = 90 * time.Second
	leaseNS     = "unitlet-system"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The in-process key minter's informers log through controller-runtime's
	// global logger: errors only, instead of its "SetLogger was never
	// called" stack in the report's output.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if _, err := testutil.Preflight("chaos", "the agents create cgroups"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := settings(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("chaos: seed %d (CHAOS_SEED=%d replays it), %d cycles, API outage %s\n", seed, seed, cycles, outage)
	var err error
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
	dir, err := os.MkdirTemp("", "unitlet-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := kubeconfigs(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer apiCut.Close()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	fmt.Print(tally.String(seed, time.Since(started)))
	if code == 0 && !tally.clean() {
		code = 1
	}
	return code
}

// settings reads CHAOS_SEED, CHAOS_CYCLES and CHAOS_OUTAGE.
func settings() error {
	seed = rand.Uint64() >> 1
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return fmt.Errorf("CHAOS_SEED=%q: %w", v, err)
		}
		seed = s
	}
	if v := os.Getenv("CHAOS_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("CHAOS_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	if v := os.Getenv("CHAOS_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("CHAOS_OUTAGE=%q: want a duration such as 60s", v)
		}
		outage = d
	}
	return nil
}

// kubeconfigs writes an admin kubeconfig for the test and one for the
// agents that points at a proxy in front of the API server.
func kubeconfigs(dir string) error {
	user, err := env.AddUser(envtest.User{Name: "chaos-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return err
	}
	adminConfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(adminConfig, raw, 0o600); err != nil {
		return err
	}
	apiCut, err = newCutProxy(env.Config.Host)
	if err != nil {
		return err
	}
	agentConfig = filepath.Join(dir, "agent.kubeconfig")
	return writeProxiedConfig(raw, apiCut.URL(), agentConfig)
}

// rngFor is a generator of its own for one test, derived from the seed
// and the test's name, so each test replays alone as in the whole run.
func rngFor(t *testing.T) *rand.Rand {
	var h uint64 = 1469598103934665603
	for _, c := range []byte(t.Name()) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
}
