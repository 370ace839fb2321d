package testutil

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Load sends GETs from workers until stop is closed and at least min
// requests were sent; it counts answers by body, and failures.
type Load struct {
	OK, Failed atomic.Int64
	mu         sync.Mutex
	bodies     map[string]int64
	firstErr   atomic.Value
}

// RunLoad drives http://addr/ with workers clients, bounded by limit
// whatever happens; it returns once every worker stopped.
func RunLoad(addr string, workers int, min int64, limit time.Duration, stop <-chan struct{}) *Load {
	l, done := StartLoad(addr, workers, min, limit, stop)
	<-done
	return l
}

// StartLoad is RunLoad without the wait: the Load counts as it runs, so a
// test reads its Tally at a window's edges to count that window apart;
// done is closed once every worker stopped.
func StartLoad(addr string, workers int, min int64, limit time.Duration, stop <-chan struct{}) (*Load, <-chan struct{}) {
	l := &Load{bodies: map[string]int64{}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	var wg sync.WaitGroup
	deadline := time.Now().Add(limit)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				select {
				case <-stop:
					if l.OK.Load()+l.Failed.Load() >= min {
						return
					}
				default:
				}
				l.one(c, addr)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return l, done
}

func (l *Load) one(c *http.Client, addr string) {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		l.fail(err)
		return
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		l.fail(fmt.Errorf("status %s: %v %s", resp.Status, err, b))
		return
	}
	l.OK.Add(1)
	l.mu.Lock()
	l.bodies[string(b)]++
	l.mu.Unlock()
}

func (l *Load) fail(err error) {
	l.Failed.Add(1)
	l.firstErr.CompareAndSwap(nil, err)
}

// Total is every request sent.
func (l *Load) Total() int64 { return l.OK.Load() + l.Failed.Load() }

// Bodies counts the answers by body.
func (l *Load) Bodies() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.bodies))
	for k, v := range l.bodies {
		out[k] = v
	}
	return out
}

// FirstErr is the first failure, or nil.
func (l *Load) FirstErr() any { return l.firstErr.Load() }
