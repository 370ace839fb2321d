package testutil

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Load sends GETs from workers until stopped and at least min requests
// were sent; it counts answers by body, and failures.
type Load struct {
	OK, Failed atomic.Int64
	mu         sync.Mutex
	bodies     map[string]int64
	firstErr   atomic.Value
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
}

// RunLoad drives http://addr/ with workers clients until stop is closed
// (and min were sent), bounded by limit whatever happens; it returns
// once every worker stopped.
func RunLoad(addr string, workers int, min int64, limit time.Duration, stop <-chan struct{}) *Load {
	l := StartLoad(addr, workers, min, limit)
	select {
	case <-stop:
	case <-time.After(limit):
	}
	l.Stop()
	return l
}

// StartLoad drives http://addr/ with workers clients until Stop (and min
// were sent), bounded by limit; Mark reads its tally while it runs.
func StartLoad(addr string, workers int, min int64, limit time.Duration) *Load {
	return StartPacedLoad(addr, workers, 0, min, limit)
}

// StartPacedLoad is StartLoad with each worker waiting pause after each
// answer: a steady load that leaves the server room, where StartLoad's
// back-to-back requests take all it has.
func StartPacedLoad(addr string, workers int, pause time.Duration, min int64, limit time.Duration) *Load {
	l := &Load{bodies: map[string]int64{}, stop: make(chan struct{})}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	deadline := time.Now().Add(limit)
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for time.Now().Before(deadline) {
				select {
				case <-l.stop:
					if l.OK.Load()+l.Failed.Load() >= min {
						return
					}
				default:
				}
				l.one(c, addr)
				time.Sleep(pause)
			}
		}()
	}
	return l
}

// Stop ends the load once min requests were sent, and waits for it.
func (l *Load) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
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
