package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// foreignNode is the node the foreign claims are held on: no agent runs
// for it.
const foreignNode = "elsewhere"

// foreignFigures are the agent's memory before and after the cluster
// grew by claims it has nothing to do with (-foreign-claims).
type foreignFigures struct {
	Claims  int     `json:"claims"`
	Seconds float64 `json:"seconds"`
	// The agent's live heap (allocated after a forced collection) and
	// its private memory, before the claims and once they were made.
	HeapBeforeMiB    float64 `json:"heapBeforeMiB"`
	HeapAfterMiB     float64 `json:"heapAfterMiB"`
	RSSAnonBeforeMiB float64 `json:"rssAnonBeforeMiB"`
	RSSAnonAfterMiB  float64 `json:"rssAnonAfterMiB"`
}

// foreignClaims makes n HostClaims held on another node, as the other
// nodes of a cluster hold them for their Instances: an agent should
// neither cache nor watch them. Every claim names one holder on that node
// (an Instance of the bench's app that no agent runs), so the cluster
// side keeps them all. It records the agent's memory around them.
func foreignClaims(ctx context.Context, h *harness, n int) (*foreignFigures, error) {
	f := &foreignFigures{Claims: n}
	holder := benchInstance("foreign-holder", "1", h.app)
	holder.Spec.NodeName = foreignNode
	if err := h.c.Create(ctx, holder); err != nil {
		return f, fmt.Errorf("the claims' holder: %w", err)
	}
	f.HeapBeforeMiB, f.RSSAnonBeforeMiB = h.liveMemory()
	t0 := time.Now()
	_, err := parallel(names("foreign", n), func(name string) error {
		c := &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: name + ".elsewhere.test"},
			Spec: v1.HostClaimSpec{Namespace: holder.Namespace, Name: holder.Name, UID: holder.UID, NodeName: foreignNode}}
		return h.c.Create(ctx, c)
	})
	f.Seconds = time.Since(t0).Seconds()
	if err != nil {
		return f, err
	}
	time.Sleep(5 * time.Second) // the agent's watch, had it one, has them all
	f.HeapAfterMiB, f.RSSAnonAfterMiB = h.liveMemory()
	return f, nil
}

// liveMemory is the agent's allocated heap just after a collection it is
// made to run (its pprof heap endpoint with gc=1) and its RssAnon, MiB;
// -1 each when the collection could not be forced.
func (h *harness) liveMemory() (heap, anon float64) {
	resp, err := http.Get("http://" + h.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return -1, -1 // no collection forced: no figure rather than a wrong one
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	live, _ := h.metric("go_memstats_heap_alloc_bytes")
	return live / (1 << 20), float64(statusKiB(h.agent.Process.Pid, "RssAnon")) / 1024
}
