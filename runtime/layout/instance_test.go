package layout

import (
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInstancePaths(t *testing.T) {
	l := Layout{StateRoot: "/var/lib/unitlet", RunRoot: "/run/unitlet", CgroupRoot: "unitlet"}
	inst, err := l.Instance("shop-ns", "web.v2")
	if err != nil {
		t.Fatal(err)
	}
	app, err := inst.AppSocket(3)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{
		"data":    inst.DataDir(),
		"private": inst.PrivateDir(),
		"ids":     l.IdentityDir(),
		"boot":    l.BootRecord(),
		"run":     inst.RunDir(),
		"app":     app,
		"control": ControlSocket(app),
		"stable":  inst.StableSocket(),
		"env":     inst.EnvFile(),
		"logdir":  inst.LogDir(),
		"logfile": inst.LogFile(),
		"cgroup":  inst.Cgroup(),
		"slice":   inst.SliceName(),
	}
	want := map[string]string{
		"data":    "/var/lib/unitlet/instances/shop-ns/web.v2",
		"private": "/var/lib/unitlet/private/shop-ns/web.v2",
		"ids":     "/var/lib/unitlet/ids",
		"boot":    "/var/lib/unitlet/boot_id",
		"run":     "/run/unitlet/shop-ns/web.v2",
		"app":     "/run/unitlet/shop-ns/web.v2/g3/app.sock",
		"control": "/run/unitlet/shop-ns/web.v2/g3/app.sock.control",
		"stable":  "/run/unitlet/shop-ns/web.v2/app.sock",
		"env":     "/var/lib/unitlet/private/shop-ns/web.v2/instance.env",
		"logdir":  "/run/unitlet/shop-ns/web.v2/logs",
		"logfile": "/var/lib/unitlet/logs/shop-ns/web.v2/app.log",
		"cgroup":  "unitlet/unitlet-shop-ns_web.v2",
		"slice":   `unitlet-shop\x2dns-web.v2.slice`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("paths (-want,+got):\n%s", d)
	}
}

func TestInstanceRejectsBadNames(t *testing.T) {
	l := Layout{StateRoot: "/s", RunRoot: "/r"}
	tests := map[string]struct{ ns, name string }{
		"empty name":       {"n", ""},
		"slash":            {"n", "a/b"},
		"dot-dot":          {"n", ".."},
		"upper":            {"N", "x"},
		"dot in namespace": {"a.b", "x"},
		"leading dash":     {"n", "-x"},
		"nul":              {"n", "a\x00b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := l.Instance(tc.ns, tc.name); !errors.Is(err, ErrBadName) {
				t.Fatalf("got %v, want ErrBadName", err)
			}
		})
	}
}

// Long names get a short, stable run dir in which every socket fits
// sun_path, and the kernel accepts a bind at the longest of them.
func TestLongNamesFitSunPath(t *testing.T) {
	// A run root as short as a node's: t.TempDir's is longer than the
	// 31 bytes a shortened run dir leaves.
	runRoot, err := os.MkdirTemp("/dev/shm", "ll")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runRoot) })
	l := Layout{StateRoot: "/s", RunRoot: runRoot}
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)
	inst, err := l.Instance("ns", long)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(runRoot, "_h", inst.ShortID()); inst.RunDir() != want {
		t.Fatalf("run dir %q, want %q", inst.RunDir(), want)
	}
	again, _ := l.Instance("ns", long)
	other, _ := l.Instance("ns", long[:len(long)-1]+"c")
	if again.RunDir() != inst.RunDir() || other.RunDir() == inst.RunDir() {
		t.Fatalf("short id not stable or not distinct: %q %q %q", inst.RunDir(), again.RunDir(), other.RunDir())
	}
	app, err := inst.AppSocket(math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := inst.Generation(math.MaxInt64)
	cmd, err := inst.Command(strings.Repeat("r", CommandNameMax))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := inst.Sidecar(strings.Repeat("s", SidecarNameMax))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{app, ControlSocket(app), inst.StableSocket(), g.LogSocket(), cmd.ErrLogSocket(), sc.LogSocket()} {
		if len(p) > SunPathMax {
			t.Errorf("%q is %d bytes, over %d", p, len(p), SunPathMax)
		}
	}
	// The run dir leaves exactly the room for the longest name, no less.
	if got := len(sc.LogSocket()) - len(inst.RunDir()); got != longestSocketSuffix {
		t.Errorf("longest sidecar log socket suffix is %d bytes, layout reserves %d", got, longestSocketSuffix)
	}
	for _, sock := range []string{ControlSocket(app), sc.LogSocket()} {
		if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatalf("bind %q: %v", sock, err)
		}
		ln.Close()
	}
	// A short name keeps its natural path.
	short, _ := l.Instance("ns", "web")
	if want := filepath.Join(runRoot, "ns", "web"); short.RunDir() != want {
		t.Errorf("run dir %q, want %q", short.RunDir(), want)
	}
}

func TestRunRootTooLong(t *testing.T) {
	l := Layout{StateRoot: "/s", RunRoot: "/" + strings.Repeat("r", 80)}
	if _, err := l.Instance("n", "x"); !errors.Is(err, ErrRunRootTooLong) {
		t.Fatalf("got %v, want ErrRunRootTooLong", err)
	}
}
