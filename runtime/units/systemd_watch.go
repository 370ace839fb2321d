package units

import (
	"context"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/go-logr/logr"
	godbus "github.com/godbus/dbus/v5"

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

// After a failed subscription no watch dials again before redialAfter:
// a thousand polling watches would otherwise dial the bus together.
// listenTimeout bounds one dial and subscription.
const (
	redialAfter   = 2 * time.Second
	listenTimeout = 5 * time.Second
)

// WatchEmpty observes the unit until it is gone: woken by systemd's
// PropertiesChanged signals, heard on a connection of the backend's own
// (cfg.Signals), polling only while it has none.
func (b *Systemd) WatchEmpty(ctx context.Context, p layout.Slot) (<-chan struct{}, error) {
	ch := make(chan struct{})
	unit := p.UnitName()
	// Registered before the first look, so a change after it wakes.
	wake, forget := b.events.add(unit)
	go func() {
		defer forget()
		for {
			every := pollEvery
			if b.events.subscribe(ctx, b.cfg.Signals, b.cfg.Log) {
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

// The signals a watch wants: a unit's own properties changing, from
// systemd.
const (
	systemdName     = "org.freedesktop.systemd1"
	unitPathPrefix  = "/org/freedesktop/systemd1/unit/"
	unitIface       = "org.freedesktop.systemd1.Unit"
	propertiesEvent = "org.freedesktop.DBus.Properties.PropertiesChanged"
)

// unitPath is the bus object of unit, as systemd's signals name it.
func unitPath(unit string) string { return unitPathPrefix + sddbus.PathBusEscape(unit) }

// unitEvents hands systemd's unit changes to the watches of those units.
// It listens on a bus connection of its own rather than through
// go-systemd's subscriber, which makes a GetUnit call, on the connection
// the starts use, for every job any client's start or stop ends: work
// nothing here reads (no effect on the batch was measured either way).
type unitEvents struct {
	// sub is held while subscribing; retryAt (no dial before it) and said
	// (the failure logged since the last success) are guarded by it.
	sub     sync.Mutex
	retryAt time.Time
	said    bool

	mu sync.Mutex
	// watches are the wake channels by unit path (each of one slot,
	// holding one token).
	watches map[string]map[chan struct{}]struct{}
	// conn is the connection listened on, nil when none.
	conn *godbus.Conn
}

// add registers a watch of unit; forget removes it.
func (e *unitEvents) add(unit string) (wake <-chan struct{}, forget func()) {
	key := unitPath(unit)
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watches == nil {
		e.watches = map[string]map[chan struct{}]struct{}{}
	}
	if e.watches[key] == nil {
		e.watches[key] = map[chan struct{}]struct{}{}
	}
	e.watches[key][ch] = struct{}{}
	return ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.watches[key], ch)
		if len(e.watches[key]) == 0 {
			delete(e.watches, key)
		}
	}
}

// subscribe makes sure a live connection delivers unit changes to the
// watches, dialling one with dial when there is none; false when it
// cannot (the watches then poll). A watch never waits for another's
// dial: it polls meanwhile. A new connection wakes every watch: what
// changed while none listened was not heard.
func (e *unitEvents) subscribe(ctx context.Context, dial func(context.Context) (*godbus.Conn, error), log logr.Logger) bool {
	if dial == nil {
		return false
	}
	if !e.sub.TryLock() {
		return e.live()
	}
	defer e.sub.Unlock()
	if e.live() {
		return true
	}
	if time.Now().Before(e.retryAt) {
		return false
	}
	c, signals, err := listen(ctx, dial)
	if err != nil {
		e.retryAt = time.Now().Add(redialAfter)
		if !e.said {
			log.Info("no unit signals; watches poll", "err", err.Error())
			e.said = true
		}
		return false
	}
	e.said = false
	// Said once per connection: an operator (and test/node) can tell
	// watches that hear their units from watches that poll.
	log.Info("unit signals heard; watches wake on them")
	go e.read(c, signals)
	e.mu.Lock()
	old := e.conn
	e.conn = c
	e.wakeLocked("")
	e.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return true
}

// live: a connection is listened on.
func (e *unitEvents) live() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn != nil && e.conn.Connected()
}

// listen dials a connection, asks the bus for systemd's unit property
// changes, and subscribes to them (systemd sends a unit's changes only
// while a client is subscribed).
func listen(ctx context.Context, dial func(context.Context) (*godbus.Conn, error)) (*godbus.Conn, <-chan *godbus.Signal, error) {
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	signals := make(chan *godbus.Signal, 256)
	c.Signal(signals)
	err = c.AddMatchSignalContext(ctx,
		godbus.WithMatchSender(systemdName),
		godbus.WithMatchInterface("org.freedesktop.DBus.Properties"),
		godbus.WithMatchMember("PropertiesChanged"),
		godbus.WithMatchPathNamespace(godbus.ObjectPath(unitPathPrefix[:len(unitPathPrefix)-1])),
		godbus.WithMatchArg(0, unitIface))
	if err == nil {
		err = c.Object(systemdName, "/org/freedesktop/systemd1").
			CallWithContext(ctx, systemdName+".Manager.Subscribe", 0).Err
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, signals, nil
}

// read wakes the watches of every unit leaving its active state until
// c closes, then every watch, so that each looks and listens again.
func (e *unitEvents) read(c *godbus.Conn, signals <-chan *godbus.Signal) {
	for s := range signals {
		if leaving(s) {
			e.wake(string(s.Path))
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == c {
		e.conn = nil
		e.wakeLocked("")
	}
}

// leaving: the signal says a unit's ActiveState changed to one that Gone
// may follow (deactivating, inactive, failed); a start's changes wake no
// one.
func leaving(s *godbus.Signal) bool {
	if s.Name != propertiesEvent || len(s.Body) < 2 {
		return false
	}
	if iface, _ := s.Body[0].(string); iface != unitIface {
		return false
	}
	changed, _ := s.Body[1].(map[string]godbus.Variant)
	v, ok := changed["ActiveState"]
	if !ok {
		return false
	}
	st, _ := v.Value().(string)
	return st != "active" && st != "activating" && st != "reloading"
}

// wake wakes the watches of the unit at path; "" wakes every watch.
func (e *unitEvents) wake(path string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wakeLocked(path)
}

// wakeLocked sends a token to each watch of the unit at path ("": of
// every unit) that has none yet; e.mu is held.
func (e *unitEvents) wakeLocked(path string) {
	if path != "" {
		wakeSet(e.watches[path])
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

// close stops listening.
func (e *unitEvents) close() {
	e.mu.Lock()
	c := e.conn
	e.conn = nil
	e.mu.Unlock()
	if c != nil {
		c.Close()
	}
}
