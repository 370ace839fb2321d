package activation

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/layout/layouttest"
)

// A caller in another cgroup than the unit's is refused, root or not,
// and the offer stays for the right one; with SO_PEERPIDFD and with the
// pidfd_open fallback of kernels before 6.5.
func TestHandOffOnlyToItsUnitsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the hand-off serves uid 0 only")
	}
	own := layouttest.OwnCgroup(t)
	tests := map[string]struct {
		cgroups []string
		served  bool
	}{
		"its unit's cgroup":               {cgroups: []string{own}, served: true},
		"one of its unit's placements":    {cgroups: []string{"/unitlet-test/nowhere/g1", own}, served: true},
		"another unit's cgroup":           {cgroups: []string{"/unitlet-test/nowhere/g1"}},
		"a cgroup whose name ends alike":  {cgroups: []string{"x" + filepath.Base(own)}},
		"a parent of its cgroup":          {cgroups: []string{filepath.Dir(own) + "/"}},
		"a cgroup its own is a parent of": {cgroups: []string{own + "/g1"}},
	}
	for _, fallback := range []bool{false, true} {
		for name, tc := range tests {
			t.Run(map[bool]string{false: "peerpidfd/", true: "pidfd_open/"}[fallback]+name, func(t *testing.T) {
				if fallback {
					orig := peerPidfdOpt
					peerPidfdOpt = func(int) (int, error) { return -1, unix.ENOPROTOOPT }
					t.Cleanup(func() { peerPidfdOpt = orig })
				}
				dir := t.TempDir()
				l, err := Bind(dir, filepath.Join(dir, "app.sock"), -1)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				s, err := Serve(filepath.Join(dir, "activation.sock"), logr.Discard())
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if err := s.Offer("unit-g1", l, tc.cgroups); err != nil {
					t.Fatal(err)
				}
				fd, err := Fetch(filepath.Join(dir, "activation.sock"), "unit-g1")
				if served := err == nil; served != tc.served {
					t.Fatalf("served %v (%v), want %v", served, err, tc.served)
				}
				if err == nil {
					unix.Close(fd)
					return
				}
				if !strings.Contains(err.Error(), "refused") {
					t.Fatalf("refusal says %q, want it refused", err)
				}
				s.mu.Lock()
				kept := s.pending["unit-g1"].f != nil
				s.mu.Unlock()
				if !kept {
					t.Fatal("a refused caller took the offer away")
				}
			})
		}
	}
}

// Serving never changes the process-wide umask, which every goroutine
// creating a file at that moment would get: read from /proc/self/status
// all the while a loop binds the hand-off socket anew.
func TestServeLeavesUmaskAlone(t *testing.T) {
	dir := t.TempDir()
	before := umask(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var seen atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if u := umask(t); u != before {
				seen.Store(u)
				return
			}
		}
	}()
	for range 300 {
		s, err := Serve(filepath.Join(dir, "activation.sock"), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	stop.Store(true)
	wg.Wait()
	if u := seen.Load(); u != nil {
		t.Fatalf("umask changed from %s to %s while serving", before, u)
	}
	if fi, err := os.Stat(filepath.Join(dir, "activation.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hand-off socket mode: %v %v, want 0600", fi, err)
	}
}

func umask(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Error(err)
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Error("no Umask in /proc/self/status")
	return ""
}

// A symlink the app swaps in over its socket's path while the agent
// binds it never makes the agent chmod or chown the link's target.
func TestBindNeverFollowsASwappedLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the chown to the socket group needs it")
	}
	stage, gen := t.TempDir(), t.TempDir()
	target := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(gen, "app.sock")
	stop := swapLinks(t, target, path)
	for range 2000 {
		if l, err := Bind(stage, path, 4242); err == nil {
			l.Close()
		}
	}
	stop()
	assertUntouched(t, target)
}

// swapLinks renames a symlink to target over path each time a socket
// shows there (the window between a bind and a chmod), until stopped.
func swapLinks(t *testing.T, target, path string) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := path + ".swap"
		_ = os.Symlink(target, tmp)
		for !done.Load() {
			if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
				_ = os.Rename(tmp, path)
				_ = os.Symlink(target, tmp)
			}
		}
	}()
	return func() { done.Store(true); wg.Wait() }
}

func assertUntouched(t *testing.T, target string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o600 || st.Gid != 0 {
		t.Fatalf("the link's target became mode %o group %d, want 600 and 0", st.Mode&0o7777, st.Gid)
	}
}
