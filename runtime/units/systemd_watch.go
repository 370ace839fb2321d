package units

import (
	"context"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/go-logr/logr"

	"github.com/unitlet/unitlet/runtime/layout"
)

// Without systemd's signals a watch observes its unit every pollEvery:
// ten property reads a unit twice a second, which at a few dozen units
// already keeps systemd busier than the starts it should be making.
const pollEvery = 500 * time.Millisecond

// With them, a watch observes its unit when systemd says the unit is
// leaving its active state, and every backstop besides: for a signal
// lost in a reconnection that the resubscription's wake did not cover.
const backstop = 30 * time.Second

// WatchEmpty observes the unit until it is gone: woken by systemd's
// PropertiesChanged signals, polling only while it cannot subscribe.
func (b *Systemd) WatchEmpty(ctx context.Context, p layout.Slot) (<-chan struct{}, error) {
	ch := make(chan struct{})
	unit := p.UnitName()
	// Registered before the first look, so a change after it wakes.
	wake, forget := b.events.add(unit)
	go func() {
		defer forget()
		for {
			every := pollEvery
			if b.subscribe(ctx) {
				every = b.backstop
			}
			st, err := b.Observe(ctx, p)
			switch {
			case err == nil && st.Gone():
				close(ch)
				return
			case err != nil:
				every = pollEvery // a lost connection: the next look resubscribes
			}
			t := time.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-wake:
				t.Stop()
			case <-t.C:
			}
		}
	}()
	return ch, nil
}

// subscribe makes sure the live connection delivers unit changes to the
// watches; false when it cannot (the watches then poll).
func (b *Systemd) subscribe(ctx context.Context) bool {
	c, err := b.connection(ctx)
	if err != nil {
		return false
	}
	return b.events.subscribe(c, b.cfg.Log) == nil
}

// unitEvents hands systemd's unit changes to the watches of those units.
type unitEvents struct {
	// sub serializes subscribing; failed is the connection whose
	// subscription failed last (said once). Both guarded by sub.
	sub    sync.Mutex
	failed *sddbus.Conn

	mu sync.Mutex
	// watches are the wake channels by unit (each of one slot, holding
	// one token).
	watches map[string]map[chan struct{}]struct{}
	// conn is the connection subscribed, stop ends its reader.
	conn *sddbus.Conn
	stop chan struct{}
}

// add registers a watch of unit; forget removes it.
func (e *unitEvents) add(unit string) (wake <-chan struct{}, forget func()) {
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watches == nil {
		e.watches = map[string]map[chan struct{}]struct{}{}
	}
	if e.watches[unit] == nil {
		e.watches[unit] = map[chan struct{}]struct{}{}
	}
	e.watches[unit][ch] = struct{}{}
	return ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.watches[unit], ch)
		if len(e.watches[unit]) == 0 {
			delete(e.watches, unit)
		}
	}
}

// subscribe subscribes c, once, unless it is the connection subscribed
// already. A new connection wakes every watch: what changed while none
// was subscribed was not signalled to it. The D-Bus call is made outside
// mu, so a bus that does not answer holds up no watch's registration.
func (e *unitEvents) subscribe(c *sddbus.Conn, log logr.Logger) error {
	e.sub.Lock()
	defer e.sub.Unlock()
	e.mu.Lock()
	subscribed := e.conn == c
	e.mu.Unlock()
	if subscribed {
		return nil
	}
	if err := c.Subscribe(); err != nil {
		if e.failed != c { // once a connection: every watch asks again
			log.Info("no unit signals; watches poll", "err", err.Error())
			e.failed = c
		}
		return err
	}
	updates, errs := make(chan *sddbus.PropertiesUpdate, 256), make(chan error, 1)
	c.SetPropertiesSubscriber(updates, errs)
	stop := make(chan struct{})
	go e.read(updates, errs, stop)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stop != nil {
		close(e.stop)
	}
	e.conn, e.stop = c, stop
	e.wakeLocked("")
	return nil
}

// read wakes the watches of every unit leaving its active state, and
// every watch when the subscription dropped updates (its buffer full).
func (e *unitEvents) read(updates <-chan *sddbus.PropertiesUpdate, errs <-chan error, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case u := <-updates:
			if leaving(u) {
				e.wake(u.UnitName)
			}
		case <-errs:
			e.wake("")
		}
	}
}

// leaving: the update says the unit's ActiveState is one that Gone may
// follow (deactivating, inactive, failed); a start's changes wake no one.
func leaving(u *sddbus.PropertiesUpdate) bool {
	v, ok := u.Changed["ActiveState"]
	if !ok {
		return false
	}
	s, _ := v.Value().(string)
	return s != "active" && s != "activating" && s != "reloading"
}

// wake wakes unit's watches; "" wakes every watch.
func (e *unitEvents) wake(unit string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wakeLocked(unit)
}

// wakeLocked sends a token to each watch of unit ("": of every unit)
// that has none yet; e.mu is held.
func (e *unitEvents) wakeLocked(unit string) {
	if unit != "" {
		wakeSet(e.watches[unit])
		return
	}
	for _, set := range e.watches {
		wakeSet(set)
	}
}

// wakeSet puts a token in each channel of set that has none.
func wakeSet(set map[chan struct{}]struct{}) {
	for ch := range set {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close ends the reader of the subscribed connection.
func (e *unitEvents) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stop != nil {
		close(e.stop)
	}
	e.conn, e.stop = nil, nil
}
