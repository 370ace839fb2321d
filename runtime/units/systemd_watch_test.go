package units

import (
	"context"
	"testing"
	"time"

	godbus "github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestLeaving(t *testing.T) {
	state := func(v any) map[string]godbus.Variant {
		return map[string]godbus.Variant{"ActiveState": godbus.MakeVariant(v)}
	}
	cases := map[string]struct {
		name  string // the signal's; PropertiesChanged when ""
		iface string // the properties'; a unit's when ""
		body  []any  // in place of the interface and changes
		want  bool
	}{
		"no ActiveState":   {body: []any{unitIface, map[string]godbus.Variant{"SubState": godbus.MakeVariant("running")}}},
		"activating":       {body: []any{unitIface, state("activating")}},
		"active":           {body: []any{unitIface, state("active")}},
		"reloading":        {body: []any{unitIface, state("reloading")}},
		"deactivating":     {body: []any{unitIface, state("deactivating")}, want: true},
		"inactive":         {body: []any{unitIface, state("inactive")}, want: true},
		"failed":           {body: []any{unitIface, state("failed")}, want: true},
		"not a string":     {body: []any{unitIface, state(uint32(1))}, want: true},
		"nothing changed":  {body: []any{unitIface, map[string]godbus.Variant{}}},
		"a service's own":  {body: []any{"org.freedesktop.systemd1.Service", state("inactive")}},
		"another signal":   {name: "org.freedesktop.systemd1.Manager.UnitRemoved", body: []any{unitIface, state("inactive")}},
		"a short body":     {body: []any{unitIface}},
		"a malformed body": {body: []any{uint32(7), "inactive"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &godbus.Signal{Name: tc.name, Path: godbus.ObjectPath(unitPath("a.service")), Body: tc.body}
			if s.Name == "" {
				s.Name = propertiesEvent
			}
			if got := leaving(s); got != tc.want {
				t.Errorf("leaving = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnitEventsWake(t *testing.T) {
	cases := map[string]struct {
		wake []string // units; "" for every one
		want []string // the watches holding a token after, of a1, a2, b
	}{
		"one unit's watches":    {wake: []string{"a"}, want: []string{"a1", "a2"}},
		"every watch":           {wake: []string{""}, want: []string{"a1", "a2", "b"}},
		"a unit nobody watches": {wake: []string{"c"}},
		"twice: one token each": {wake: []string{"b", "b"}, want: []string{"b"}},
		"a forgotten watch":     {wake: []string{"gone", ""}, want: []string{"a1", "a2", "b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var e unitEvents
			a1, _ := e.add("a")
			a2, _ := e.add("a")
			b, _ := e.add("b")
			gone, forget := e.add("gone")
			forget()
			for _, u := range tc.wake {
				if u != "" {
					u = unitPath(u)
				}
				e.wake(u)
			}
			var got []string
			for _, w := range []struct {
				name string
				ch   <-chan struct{}
			}{{"a1", a1}, {"a2", a2}, {"b", b}, {"gone", gone}} {
				select {
				case <-w.ch:
					got = append(got, w.name)
				default:
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("woken (-want,+got):\n%s", diff)
			}
			if _, left := e.watches[unitPath("gone")]; left {
				t.Error("a forgotten unit is still watched")
			}
		})
	}
}

// A watch learns of its unit's stop from systemd's signal: its backstop
// is an hour here.
func TestSystemdWatchWokenBySignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	b.backstop = time.Hour // only the signal can end the watch in time
	p, empty := watchRunning(ctx, t, env, b, "watched")
	if listening(b) == nil {
		t.Fatal("the watch did not subscribe to systemd's signals")
	}
	stopAndAwait(ctx, t, env, p, empty)
}

// A lost signal connection wakes every watch, which listens again on a
// new one: the stop after it is heard, with the backstop an hour.
func TestSystemdWatchListensAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	b := env.backend(t, 5*time.Second)
	b.backstop = time.Hour
	p, empty := watchRunning(ctx, t, env, b, "relistened")
	first := listening(b)
	if first == nil {
		t.Fatal("the watch did not subscribe to systemd's signals")
	}
	first.Close()
	for c := listening(b); c == nil || c == first; c = listening(b) {
		if ctx.Err() != nil {
			t.Fatal("no new signal connection after the first was lost")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopAndAwait(ctx, t, env, p, empty)
}

// Without a signal connection a watch polls, and still sees its unit go.
func TestSystemdWatchPollsWithoutSignals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := newSDEnv(t)
	cfg := env.config(5*time.Second, t)
	cfg.Signals = nil
	b, err := NewSystemd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	b.backstop = time.Hour // were it listening, only a signal would end the watch
	p, empty := watchRunning(ctx, t, env, b, "polled")
	stopAndAwait(ctx, t, env, p, empty)
	if listening(b) != nil {
		t.Error("a backend without Signals listens")
	}
}

// watchRunning starts a unit that sleeps and watches it; its watch must
// not end while it runs.
func watchRunning(ctx context.Context, t *testing.T, env *sdEnv, b *Systemd, name string) (layout.Slot, <-chan struct{}) {
	t.Helper()
	p := env.proc(t, name, 1, "/bin/sleep", "1000")
	if got := b.Start(ctx, Spec{Slot: p, Grace: time.Second}); got.Kind != outcome.Running {
		t.Fatalf("start: %v (%v)", got.Kind, got.Cause)
	}
	t.Cleanup(func() { b.Prove(context.Background(), p) })
	empty, err := b.WatchEmpty(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-empty:
		t.Fatal("a running unit's watch ended")
	case <-time.After(time.Second):
	}
	return p, empty
}

// stopAndAwait stops p's unit behind the backend's back and waits, until
// ctx ends, for its watch to end.
func stopAndAwait(ctx context.Context, t *testing.T, env *sdEnv, p layout.Slot, empty <-chan struct{}) {
	t.Helper()
	if err := stopUnit(ctx, env.conn(t), p.UnitName()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-empty:
	case <-ctx.Done():
		t.Fatal("the watch never saw the unit stop")
	}
}

// listening is the connection b's watches hear signals on, nil when none.
func listening(b *Systemd) *godbus.Conn {
	b.events.mu.Lock()
	defer b.events.mu.Unlock()
	return b.events.conn
}
