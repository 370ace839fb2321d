package agent

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// apiLimits sets how the agent's client paces its requests to the API
// server. By default it does not: the API server's Priority and Fairness is
// the budget (config/flowcontrol gives the agents a priority level of their
// own, as the kubelets have system-nodes), which is controller-runtime's
// default since its PR 3119. An operator's cap (--kube-api-qps, qps > 0)
// is one token bucket for the whole client: left to client-go, every
// RESTClient gets its own bucket, and controller-runtime makes one per
// resource, so the cap would multiply by the resources the agent touches.
func apiLimits(cfg *rest.Config, qps float32, burst int) error {
	switch {
	case qps == 0:
		// client-go reads QPS 0 as its default of 5; below 0 is none.
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		return nil
	case qps < 0:
		return fmt.Errorf("--kube-api-qps=%g: want 0 (no cap) or more", qps)
	case burst < 1:
		return fmt.Errorf("--kube-api-burst=%d: want 1 or more with --kube-api-qps=%g", burst, qps)
	}
	cfg.QPS, cfg.Burst = qps, burst
	// rest.CopyConfig keeps the pointer: every client made from cfg, for
	// any resource, takes its tokens from this one bucket.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return nil
}
