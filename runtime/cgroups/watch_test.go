package cgroups

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

// The watch fires once the child's last process exits, not before, and at
// once for a child that is already empty.
func TestWatchEmptyFiresWhenChildEmpties(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "watch", Tier{})
	g1, _ := m.CreateGeneration(1, Tier{})
	h := spawnIn(t, m, g1, "exec sleep 1000", 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := m.WatchEmpty(ctx, g1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("watch fired while the child is populated")
	case <-time.After(150 * time.Millisecond): // past one poll interval
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not fire after the last process exited")
	}

	g2, _ := m.CreateGeneration(2, Tier{})
	ch2, err := m.WatchEmpty(ctx, g2)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch2:
	case <-time.After(10 * time.Second):
		t.Fatal("watch on an empty child did not fire")
	}
}

// With the polling fallback alone (no inotify, as on plain v1) the watch
// fires all the same; a cancelled watch never claims emptiness.
func TestWatchPollingAndCancel(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "watchpoll", Tier{}).(*instance)
	g1, _ := m.CreateGeneration(1, Tier{})
	h := spawnIn(t, m, g1, "exec sleep 1000", 1)
	noEvents := noEventsDriver{m.d}

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := watchEmpty(ctx, noEvents, m.rel(g1), 10*time.Millisecond)
	cancel()
	select {
	case <-cancelled:
		t.Fatal("a cancelled watch fired while the child is populated")
	case <-time.After(100 * time.Millisecond):
	}

	ch := watchEmpty(context.Background(), noEvents, m.rel(g1), 10*time.Millisecond)
	_ = h.cmd.Process.Kill()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("polling watch did not fire")
	}
}

type noEventsDriver struct{ driver }

func (noEventsDriver) eventsFile(string) string { return "" }

// More watches than the kernel's default inotify instances per user (128)
// all run on notification, sharing one instance: none falls back to
// polling, and each still fires when its child empties.
func TestWatchesShareOneInotify(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "watchmany", Tier{}).(*instance)
	if m.d.eventsFile(m.rel("g1")) == "" {
		// Every machine the suites run on has one (this host's unified
		// hierarchy beside v1, the node VM's pure v2); only plain v1,
		// which no supported node is, polls by design.
		t.Fatal("no cgroup2 hierarchy: nothing here would be notified")
	}
	const n = 140
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held []*held
	var fired []<-chan struct{}
	for i := 1; i <= n; i++ {
		g, err := m.CreateGeneration(int64(i), Tier{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, spawnIn(t, m, g, "exec sleep 1000", 1))
		ch, err := m.WatchEmpty(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		fired = append(fired, ch)
	}
	if got := inotifyFDs(t); got != 1 {
		t.Errorf("%d inotify instances open for %d watches, want 1", got, n)
	}
	for _, h := range held {
		_ = h.cmd.Process.Kill()
	}
	for i, ch := range fired {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("watch %d did not fire after its child emptied", i+1)
		}
	}
}

// inotifyFDs counts this process's open inotify instances.
func inotifyFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "anon_inode:inotify" {
			k++
		}
	}
	return k
}

// A notified watch holds no goroutine while it waits, calls back once the
// child empties, and never after its ctx ended.
func TestOnEmptyHoldsNoGoroutine(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "onempty", Tier{}).(*instance)
	if m.d.eventsFile(m.rel("")) == "" {
		// Only a legacy v1 host without a cgroup2 mount: OnEmpty is not
		// offered there, and the node watches by polling instead.
		t.Skip("no cgroup.events here: the watch polls")
	}
	g1, _ := m.CreateGeneration(1, Tier{})
	g2, _ := m.CreateGeneration(2, Tier{})
	h1 := spawnIn(t, m, g1, "exec sleep 1000", 1)
	h2 := spawnIn(t, m, g2, "exec sleep 1000", 1)
	before := runtime.NumGoroutine()
	fired := make(chan string, 4)
	if err := m.OnEmpty(context.Background(), g1, func() { fired <- g1 }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.OnEmpty(ctx, g2, func() { fired <- g2 }); err != nil {
		t.Fatal(err)
	}
	// One: the process's shared inotify reader, started by the first.
	if grown := runtime.NumGoroutine() - before; grown > 1 {
		t.Errorf("%d goroutines more while two watches wait, want at most the shared reader", grown)
	}
	cancel()
	_ = h1.cmd.Process.Kill()
	_ = h2.cmd.Process.Kill()
	select {
	case got := <-fired:
		if got != g1 {
			t.Fatalf("fired for %s, want %s (the other's ctx ended)", got, g1)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not fire after the last process exited")
	}
	select {
	case got := <-fired:
		t.Fatalf("fired again, for %s", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// A watch whose ctx has already ended never calls back, even on a child
// that is empty from the start: the ctx hook runs on its own goroutine, and
// the first look must not beat it (CI saw the notified case race so).
func TestOnEmptyAfterCtxEndedNeverFires(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, "onemptyended", Tier{}).(*instance)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fired := make(chan string, 2)
	for i, d := range []driver{m.d, noEventsDriver{m.d}} {
		g, err := m.CreateGeneration(int64(i+1), Tier{})
		if err != nil {
			t.Fatal(err)
		}
		onEmpty(ctx, d, m.rel(g), watchPoll, func() { fired <- g })
	}
	select {
	case got := <-fired:
		t.Fatalf("fired for %s after its ctx ended", got)
	case <-time.After(300 * time.Millisecond):
	}
}
