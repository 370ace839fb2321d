package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// apiRetry spaces the agent's attempts to reach an API server that does
// not answer at start, for as long as it takes (as the kubelet keeps
// trying; an agent that exited instead would wait out its container's
// CrashLoopBackOff once the API is back). A version request every 2 s
// costs the API server nothing. (A wait.Backoff with a Cap would end at
// the cap: its steps drop to zero there.)
const apiRetry = 2 * time.Second

// waitForAPI returns once the API server answers (its version), or when
// ctx ends. Meanwhile the probes are served: /healthz 200, /readyz and
// /hostingz 503 with the last error, so a liveness probe does not
// restart an agent that is only waiting.
func waitForAPI(ctx context.Context, cfg *rest.Config, probeAddr string, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	var mu sync.Mutex
	last := errors.New("waiting for the API server")
	waiting := func() error {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	reached := func(ctx context.Context) (bool, error) {
		_, err := dc.ServerVersion()
		if err == nil {
			return true, nil
		}
		log.Info("API server not reachable; trying again", "err", err.Error())
		mu.Lock()
		last = fmt.Errorf("waiting for the API server: %w", err)
		mu.Unlock()
		return false, nil
	}
	if ok, _ := reached(ctx); ok {
		return nil
	}
	pctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- (&probeServer{addr: probeAddr, ready: waiting, hosting: waiting}).Start(pctx)
	}()
	err = wait.PollUntilContextCancel(ctx, apiRetry, false, reached)
	stop()
	// The manager's own probe server listens on the same address next.
	if serr := <-served; serr != nil {
		log.Error(serr, "probes while waiting for the API server")
	}
	return err
}
