package controllers

import (
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Restart spacing (a sidecar's, an app's successors'), the kubelet's
// CrashLoopBackOff figures.
const (
	restartBackoffInitial = 10 * time.Second
	restartBackoffMax     = 5 * time.Minute
)

// restartBackoff spaces the restarts of what keeps dying (a sidecar, or
// an app whose generations end on their own): the first restart comes
// at once, each later one no sooner than the backoff after the one
// before, which doubles up to its cap. What ran for twice the cap since
// its last restart starts from the beginning. Without it a process that
// dies at once would be started again as fast as its deaths are seen.
type restartBackoff struct {
	b *flowcontrol.Backoff

	mu   sync.Mutex
	last map[string]time.Time // by key: the last restart
}

func newRestartBackoff(initial, max time.Duration, clk clock.Clock) *restartBackoff {
	b := flowcontrol.NewBackOff(initial, max)
	b.Clock = clk
	return &restartBackoff{b: b, last: map[string]time.Time{}}
}

// wait is how long key must still wait before it may restart; 0: now.
func (r *restartBackoff) wait(key string) time.Duration {
	r.mu.Lock()
	last, ok := r.last[key]
	r.mu.Unlock()
	if !ok || !r.b.IsInBackOffSince(key, last) {
		return 0
	}
	return r.b.Get(key) - r.b.Clock.Since(last)
}

// restarted records a restart of key now and lengthens its backoff.
func (r *restartBackoff) restarted(key string) {
	now := r.b.Clock.Now()
	r.b.Next(key, now)
	r.mu.Lock()
	r.last[key] = now
	r.mu.Unlock()
}

// forget drops every key that starts with prefix.
func (r *restartBackoff) forget(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.last {
		if strings.HasPrefix(key, prefix) {
			delete(r.last, key)
			r.b.DeleteEntry(key)
		}
	}
}
