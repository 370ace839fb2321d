package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// probeServer answers the kubelet's (or a load balancer's) probes:
// /healthz is 200 while the process serves; /readyz is 200 once the agent
// has read its Enrollment from the API server (once: it does not go back); /hostingz is 200 while
// the node accepts new work and 503 naming the stage otherwise. It replaces the
// manager's probe server, whose failing checks answer 500 and withhold
// the reason.
type probeServer struct {
	addr           string
	ready, hosting func() error
}

// NeedLeaderElection is false: every agent answers its own probes.
func (p *probeServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (p *probeServer) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", check(p.ready))
	mux.HandleFunc("/hostingz", check(p.hosting))
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("probe endpoint %s: %w", p.addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// check answers 200, or 503 with the check's error.
func check(f func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := f(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}
