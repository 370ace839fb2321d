// Command bench measures unitlet at scale on this machine (`make bench`):
// a local control plane, one agent (direct backend), N Instances of a tiny
// static app applied in one go, measured from the client side with a
// watch: all Ready, per-Instance apply→Ready, the agent's CPU, memory and
// API requests, an idle minute, an Overlap swap of all N, a node reboot
// under all N (time-to-serving apart from time-to-reported), a delete of
// all N until nothing is left on the node, and a small batch for latency.
// Beside them, in the same run, the raw primitives: N fork/execs into
// cgroups, and N StartTransientUnit calls on a booted systemd. It prints a
// table and writes the figures as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// phaseNames are what -phases may name, in the order they run.
var phaseNames = []string{"create", "idle", "swap", "reboot", "delete", "batch", "floor", "raw"}

type options struct {
	n, batch int
	// batchRounds and singleRounds: how often the batch and the single
	// Instance are applied (and deleted), their latencies pooled.
	batchRounds, singleRounds int
	// phases: which phases run (nil: all).
	phases map[string]bool
	// agent is the agent's binary (its shim beside it); agentArgs are
	// added to its arguments (e.g. --zap-log-level=5 to trace reconciles).
	agent     string
	agentArgs []string
	trace     bool
	idle      time.Duration
	jsonOut   string
	raw       bool
	qps       int
	// profileDir, if set, receives the agent's CPU profile of each phase
	// and its heap after the create.
	profileDir string
	// phaseLimit bounds one phase: one that does not finish is reported
	// with what it reached.
	phaseLimit time.Duration
	// foreignClaims: HostClaims of other nodes made before the phases.
	foreignClaims int
}

func main() {
	// The key minter runs in this process through controller-runtime,
	// whose logger otherwise prints a stack trace mid-run: quiet here.
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.IntVar(&o.n, "n", 1000, "Instances applied in one go")
	flag.IntVar(&o.batch, "batch", 30, "Instances of the latency batch")
	flag.IntVar(&o.batchRounds, "batch-rounds", 3, "how often the batch is applied, its latencies pooled")
	flag.IntVar(&o.singleRounds, "single-rounds", 5, "how often one Instance is applied alone before the batch")
	flag.Func("app-cpu", "the app's CPU tier (default 50m, the validated minimum)", func(v string) error {
		q, err := resource.ParseQuantity(v)
		appCPU = q
		return err
	})
	flag.BoolVar(&o.trace, "trace", false, "print every version the watch saw of the first Instance of each batch round 0, and of its Generations")
	agentArgs := flag.String("agent-args", "", "space-separated arguments added to the agent's")
	phases := flag.String("phases", "", "comma-separated phases to run, of "+strings.Join(phaseNames, ",")+" (empty: all)")
	flag.StringVar(&o.agent, "agent", testutil.AgentBinary(), "the agent's binary (the direct backend's shim is the unitlet-shim beside it)")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long the settled agent is watched idle")
	flag.StringVar(&o.jsonOut, "json", "bin/bench.json", "where the figures are written")
	flag.BoolVar(&o.raw, "raw", true, "measure the raw baselines (fork/exec, systemd) too")
	flag.DurationVar(&o.phaseLimit, "phase-limit", 10*time.Minute, "how long one phase may take")
	flag.IntVar(&o.qps, "agent-qps", 0, "the agent's --kube-api-qps (0: its default)")
	flag.IntVar(&o.foreignClaims, "foreign-claims", 0, "HostClaims held on other nodes made before the phases (the agent's memory beside a larger cluster)")
	flag.StringVar(&o.profileDir, "profile", "", "a directory for the agent's pprof profiles (none if empty)")
	flag.Parse()
	o.agentArgs = strings.Fields(*agentArgs)
	if *phases != "" {
		o.phases = map[string]bool{}
		for _, p := range strings.Split(*phases, ",") {
			if !slices.Contains(phaseNames, p) {
				fmt.Fprintf(os.Stderr, "bench: no phase %q (have %s)\n", p, strings.Join(phaseNames, ","))
				os.Exit(2)
			}
			o.phases[p] = true
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if res != nil {
		fmt.Print(res.table())
		if b, jerr := json.MarshalIndent(res, "", "  "); jerr == nil {
			if werr := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); werr != nil {
				fmt.Fprintln(os.Stderr, "bench:", werr)
			} else {
				fmt.Println("figures written to", o.jsonOut)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run sets up, runs every phase in order and tears down; it returns what
// was measured even when a phase failed.
func run(ctx context.Context, o options) (*results, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("run as root: the agent creates cgroups")
	}
	h, err := setup(ctx, o)
	if err != nil {
		return nil, err
	}
	defer h.close()
	res := &results{N: o.n, Batch: o.batch, Date: time.Now().UTC().Format(time.RFC3339)}
	if o.foreignClaims > 0 {
		fmt.Printf("bench: %d foreign claims ...\n", o.foreignClaims)
		if res.Foreign, err = foreignClaims(ctx, h, o.foreignClaims); err != nil {
			return res, fmt.Errorf("foreign claims: %w", err)
		}
	}
	phases := []struct {
		name string
		f    func(context.Context, *harness, *results) error
	}{
		{"create", phaseCreateWithReads}, {"idle", phaseIdle}, {"swap", phaseSwap}, {"reboot", phaseReboot}, {"delete", phaseDelete}, {"batch", phaseBatch},
		{"floor", apiFloor},
	}
	for _, p := range phases {
		if o.phases != nil && !o.phases[p.name] {
			continue
		}
		fmt.Printf("bench: %s ...\n", p.name)
		if err := p.f(ctx, h, res); err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if o.raw && (o.phases == nil || o.phases["raw"]) {
		fmt.Println("bench: raw fork/exec ...")
		if err := rawForkExec(ctx, h, res); err != nil {
			return res, fmt.Errorf("raw fork/exec: %w", err)
		}
		fmt.Println("bench: raw systemd ...")
		if err := rawSystemd(ctx, h, res); err != nil {
			return res, fmt.Errorf("raw systemd: %w", err)
		}
	}
	return res, nil
}
