package units

import (
	"context"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestLeaving(t *testing.T) {
	cases := map[string]struct {
		changed map[string]godbus.Variant
		want    bool
	}{
		"no ActiveState":  {changed: map[string]godbus.Variant{"SubState": godbus.MakeVariant("running")}},
		"activating":      {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("activating")}},
		"active":          {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("active")}},
		"reloading":       {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("reloading")}},
		"deactivating":    {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("deactivating")}, want: true},
		"inactive":        {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("inactive")}, want: true},
		"failed":          {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant("failed")}, want: true},
		"not a string":    {changed: map[string]godbus.Variant{"ActiveState": godbus.MakeVariant(uint32(1))}, want: true},
		"nothing changed": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := leaving(&sddbus.PropertiesUpdate{UnitName: "a.service", Changed: tc.changed}); got != tc.want {
				t.Errorf("leaving = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnitEventsWake(t *testing.T) {
	cases := map[string]struct {
		wake []string
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
			if _, left := e.watches["gone"]; left {
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
	p := env.proc(t, "watched", 1, "/bin/sleep", "1000")
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
	b.events.mu.Lock()
	subscribed := b.events.conn != nil
	b.events.mu.Unlock()
	if !subscribed {
		t.Fatal("the watch did not subscribe to systemd's signals")
	}
	done := make(chan string, 1)
	if _, err := env.conn(t).StopUnitContext(ctx, p.UnitName(), "replace", done); err != nil {
		t.Fatal(err)
	}
	select {
	case <-empty:
	case <-ctx.Done():
		t.Fatal("the watch never saw the unit stop")
	}
}
