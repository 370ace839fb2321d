package cgroups

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// Backoff of the wait for emptiness: short first, since a SIGKILLed
// process is usually gone within a millisecond, capped so a slow exit
// costs little CPU. inotify is not used here: the kernel rate-limits
// cgroup.events notifications to about one per 10 ms.
const (
	killBackoffMin = 50 * time.Microsecond
	killBackoffMax = 2 * time.Millisecond
)

func (m *instance) KillAndEmpty(ctx context.Context, child string) Proof {
	if err := checkChild(child); err != nil {
		return Proof{Child: child, Reason: ReasonError, Err: err}
	}
	p := killAndEmpty(ctx, m.d, m.rel(child), m.cfg.Log)
	p.Child = child
	return p
}

// killAndEmpty kills everything below rel, again and again, until rel is
// seen empty or ctx ends. It never looks outside rel. An absent rel is
// empty. Only a look that saw no process proves the kill.
func killAndEmpty(ctx context.Context, d driver, rel string, log logr.Logger) Proof {
	start := time.Now()
	p := Proof{Child: rel}
	done := func(q Proof) Proof {
		q.Took = time.Since(start)
		if q.Proven {
			log.V(1).Info("kill proven", "cgroup", rel, "took", q.Took)
		} else {
			log.Info("kill unproven", "cgroup", rel, "reason", q.Reason, "remaining", q.Remaining, "error", q.Err)
		}
		return q
	}
	var lastErr error
	backoff := killBackoffMin
	for {
		if !d.exists(rel) {
			p.Proven = true
			return done(p)
		}
		pop, err := d.populated(rel)
		switch {
		case err != nil && !d.exists(rel):
			p.Proven = true // removed while we looked: empty
			return done(p)
		case err != nil && isPermission(err):
			p.Reason, p.Err = ReasonPermission, err
			p.Remaining = count(d, rel)
			return done(p)
		case err != nil:
			lastErr = err
		case !pop:
			p.Proven = true
			return done(p)
		}
		if cerr := ctx.Err(); cerr != nil {
			p.Reason = ReasonStillPopulated
			if errors.Is(cerr, context.DeadlineExceeded) {
				p.Reason = ReasonDeadline
			}
			p.Err = errors.Join(cerr, lastErr)
			p.Remaining = count(d, rel)
			return done(p)
		}
		if err := d.killOnce(rel); err != nil {
			if isPermission(err) {
				p.Reason, p.Err = ReasonPermission, err
				p.Remaining = count(d, rel)
				return done(p)
			}
			lastErr = err // e.g. a freeze that did not settle: try again
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, killBackoffMax)
	}
}

func count(d driver, rel string) int {
	pids, _ := d.pids(rel)
	return len(pids)
}

func isPermission(err error) bool {
	return errors.Is(err, os.ErrPermission) || isROFS(err)
}

func isROFS(err error) bool { return errors.Is(err, unix.EROFS) }
