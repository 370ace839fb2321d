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
	"syscall"
	"time"
)

type options struct {
	n, batch int
	idle     time.Duration
	jsonOut  string
	raw      bool
	qps      int
	// profileDir, if set, receives the agent's CPU profile of each phase
	// and its heap after the create.
	profileDir string
	// agent is the unitlet binary run as the agent ("": the checkout's
	// bin/unitlet); its unitlet-shim lies beside it.
	agent string
	// phaseLimit bounds one phase: one that does not finish is reported
	// with what it reached.
	phaseLimit time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "Instances applied in one go")
	flag.IntVar(&o.batch, "batch", 30, "Instances of the latency batch")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long the settled agent is watched idle")
	flag.StringVar(&o.jsonOut, "json", "bin/bench.json", "where the figures are written")
	flag.BoolVar(&o.raw, "raw", true, "measure the raw baselines (fork/exec, systemd) too")
	flag.DurationVar(&o.phaseLimit, "phase-limit", 10*time.Minute, "how long one phase may take")
	flag.IntVar(&o.qps, "agent-qps", 0, "the agent's --kube-api-qps (0: its default)")
	flag.StringVar(&o.profileDir, "profile", "", "a directory for the agent's pprof profiles (none if empty)")
	flag.StringVar(&o.agent, "agent", "", "the agent's binary, with unitlet-shim beside it (default: the checkout's bin/unitlet)")
	flag.Parse()
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
	phases := []struct {
		name string
		f    func(context.Context, *harness, *results) error
	}{
		{"create", phaseCreateWithReads}, {"idle", phaseIdle}, {"swap", phaseSwap}, {"reboot", phaseReboot}, {"delete", phaseDelete}, {"batch", phaseBatch},
		{"API floor", apiFloor},
	}
	for _, p := range phases {
		fmt.Printf("bench: %s ...\n", p.name)
		if err := p.f(ctx, h, res); err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if o.raw {
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
