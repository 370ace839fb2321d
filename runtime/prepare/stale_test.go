package prepare

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStaleExitRecordsOfThisGenerationOnly(t *testing.T) {
	f := newFixture(t)
	names := []string{"exit.gen.1.inv-a", "exit.gen.1.inv-b", "exit.gen.10.inv-c", "exit.gen.2.inv-d", "exit.seed.inv-e", "exit.run.inv-f"}
	for _, n := range names {
		touch(t, filepath.Join(f.inst.ExitDir(), n))
	}
	prepareOK(t, f.request(layout.RoleApp, 1))
	var left []string
	entries, _ := os.ReadDir(f.inst.ExitDir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "exit.") {
			left = append(left, e.Name())
		}
	}
	slices.Sort(left)
	if d := cmp.Diff([]string{"exit.gen.10.inv-c", "exit.gen.2.inv-d", "exit.run.inv-f", "exit.seed.inv-e"}, left); d != "" {
		t.Errorf("records left (-want,+got):\n%s", d)
	}
}

func TestStaleAppSocketRemovedOnlyThatPath(t *testing.T) {
	f := newFixture(t)
	g1, _ := f.inst.AppSocket(1)
	g2, _ := f.inst.AppSocket(2)
	touch(t, g2)
	// A real leftover socket for g1: bound, then its owner gone.
	if err := os.MkdirAll(filepath.Dir(g1), 0o750); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: g1, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := os.Symlink(filepath.Join("g2", layout.AppSocketName), f.inst.StableSocket()); err != nil {
		t.Fatal(err)
	}
	prepareOK(t, f.request(layout.RoleApp, 1))
	if _, err := os.Lstat(g1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale g1 socket still there: %v", err)
	}
	for _, p := range []string{g2, f.inst.StableSocket()} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestControlBindFailureIsWarning(t *testing.T) {
	f := newFixture(t)
	app, _ := f.inst.AppSocket(1)
	// A non-empty directory where the control socket goes: it cannot be
	// removed as stale and the bind fails.
	touch(t, filepath.Join(layout.ControlSocket(app), "blocker"))
	res := prepareOK(t, f.request(layout.RoleApp, 1))
	if res.Control != nil {
		t.Fatal("control server despite the failed bind")
	}
	found := false
	for _, w := range res.Warnings {
		found = found || strings.Contains(w.Error(), "running without control verbs")
	}
	if !found {
		t.Errorf("no control warning in %v", res.Warnings)
	}
	if _, ok := res.Env[EnvControlSocket]; ok {
		t.Error("env still names the control socket")
	}
	if res.Logs == nil {
		t.Error("prepare did not continue to the log listener")
	}
}

func TestFailureClosesEverything(t *testing.T) {
	f := newFixture(t)
	p, _ := f.inst.Generation(1)
	// The log socket path is a non-empty directory: the last step fails
	// after the control socket was bound.
	touch(t, filepath.Join(p.LogSocket(), "blocker"))
	res, err := Prepare(f.request(layout.RoleApp, 1))
	if err == nil {
		res.Close()
		t.Fatal("prepare succeeded")
	}
	app, _ := f.inst.AppSocket(1)
	ctl := layout.ControlSocket(app)
	if _, err := os.Lstat(ctl); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left: %v", err)
	}
	if c, err := net.Dial("unix", ctl); err == nil {
		c.Close()
		t.Error("control socket still accepts")
	}
}
