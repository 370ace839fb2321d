package units

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/go-logr/logr/testr"

	"github.com/unitlet/unitlet/internal/testkit/systemdboot"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
)

// sdEnv is a booted systemd with a layout whose dirs it can write.
type sdEnv struct {
	sys *systemdboot.System
	lay layout.Layout
	exe string
}

func newSDEnv(t testing.TB) *sdEnv {
	t.Helper()
	// An app's sandbox (the trampoline's) has a /tmp of its own: the
	// layout's roots and the trampoline live where an agent's would, in a
	// directory of the test's own outside /tmp.
	root, err := os.MkdirTemp("/var/lib", "unitlet-units-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	exe := filepath.Join(root, "unitlet")
	if err := copyFile(exe, "/proc/self/exe"); err != nil {
		t.Fatal(err)
	}
	sys := systemdboot.BootWith(t, systemdboot.Options{Writable: []string{root}})
	return &sdEnv{
		sys: sys,
		lay: layout.Layout{StateRoot: filepath.Join(root, "state"), RunRoot: filepath.Join(root, "run"), CgroupRoot: "unitlet"},
		exe: exe,
	}
}

func (e *sdEnv) config(budget time.Duration, t testing.TB) SystemdConfig {
	return SystemdConfig{
		Connect: e.sys.Conn,
		Signals: e.sys.Bus,
		Exe:     e.exe,
		CgroupDirs: func(cg string) []string {
			return []string{
				e.sys.HostCgroup("systemd", cg), e.sys.HostCgroup("unified", cg),
				e.sys.HostCgroup("memory", cg), e.sys.HostCgroup("pids", cg),
			}
		},
		ProofBudget: budget,
		Layout:      e.lay,
		Log:         testr.NewWithInterface(t, testr.Options{}),
	}
}

func (e *sdEnv) backend(t testing.TB, budget time.Duration) *Systemd {
	t.Helper()
	b, err := NewSystemd(e.config(budget, t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// proc prepares generation n of instance name: its dirs and a launch
// file running argv.
func (e *sdEnv) proc(t testing.TB, name string, n int64, argv ...string) layout.Slot {
	t.Helper()
	return makeProc(t, e.lay, name, n, argv...)
}

// makeProc prepares generation n of instance name under lay: its dirs
// and a launch file running argv.
func makeProc(t testing.TB, lay layout.Layout, name string, n int64, argv ...string) layout.Slot {
	t.Helper()
	return makeSlot(t, lay, name, func(i layout.Instance) (layout.Slot, error) { return i.Generation(n) }, argv...)
}

// makeSlot is makeProc for the slot pick chooses in instance ns1/name.
func makeSlot(t testing.TB, lay layout.Layout, name string, pick func(layout.Instance) (layout.Slot, error), argv ...string) layout.Slot {
	t.Helper()
	inst, err := lay.Instance("ns1", name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pick(inst)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{inst.PrivateDir(), inst.DataDir(), inst.RunDir(), inst.LogDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f := launch.File{Schema: launch.Schema, Host: name + ".example.com", Argv: argv, Env: []string{"PATH=/usr/bin:/bin"}}
	if err := launch.Write(inst.PrivateDir(), p.LaunchFile(), f); err != nil {
		t.Fatal(err)
	}
	return p
}

// conn is a connection of the test's own, to look at what the backend did.
func (e *sdEnv) conn(t testing.TB) *sddbus.Conn {
	t.Helper()
	c, err := e.sys.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
