package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// profile saves the agent's CPU profile over the next secs seconds (in
// the background) as <dir>/<name>.cpu.pprof; nothing without -profile.
func (h *harness) profile(name string, secs int) {
	if h.o.profileDir == "" {
		return
	}
	go h.savePprof(fmt.Sprintf("profile?seconds=%d", secs), name+".cpu.pprof")
}

// heapProfile saves the agent's live heap now as <dir>/<name>.heap.pprof,
// and its goroutines as <name>.goroutines.txt.
func (h *harness) heapProfile(name string) {
	if h.o.profileDir != "" {
		h.savePprof("heap?gc=1", name+".heap.pprof")
		h.savePprof("goroutine?debug=1", name+".goroutines.txt")
	}
}

func (h *harness) savePprof(query, file string) {
	resp, err := http.Get("http://" + h.pprof + "/debug/pprof/" + query)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: pprof:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(h.o.profileDir, file))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: pprof:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// serverProfile saves the API server's CPU profile over the next secs
// seconds (in the background) as <dir>/<name>.apiserver.cpu.pprof.
func (h *harness) serverProfile(ctx context.Context, name string, secs int) {
	if h.o.profileDir == "" {
		return
	}
	go func() {
		hc, err := rest.HTTPClientFor(h.env.Config)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: pprof:", err)
			return
		}
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(h.env.Config.Host, "/"), secs)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: pprof:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(h.o.profileDir, name+".apiserver.cpu.pprof"))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
}
