package layout

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProcNames(t *testing.T) {
	l := Layout{StateRoot: "/s", RunRoot: "/r"}
	inst, err := l.Instance("a-b", "c")
	if err != nil {
		t.Fatal(err)
	}
	type names struct{ Launch, Exit, Log, ErrLog, Terminal, Unit string }
	tests := map[string]struct {
		role Role
		gen  int64
		name string
		want names
	}{
		"generation": {RoleApp, 12, "", names{"launch.gen.12.json", "exit.gen.12.", "/r/a-b/c/logs/g12.sock", "", "", `unitlet-a\x2db-c-g12.service`}},
		"seed":       {RoleSeed, 0, "", names{"launch.seed.json", "exit.seed.", "/r/a-b/c/logs/seed.sock", "", "", `unitlet-a\x2db-c-seed.service`}},
		"cmd":        {RoleCommand, 0, "run-1a", names{"launch.cmd.run-1a.json", "exit.cmd.run-1a.", "/r/a-b/c/logs/cmd.run-1a.out.sock", "/r/a-b/c/logs/cmd.run-1a.err.sock", "/r/a-b/c/logs/cmd.run-1a.tty.sock", `unitlet-a\x2db-c-cmd-run\x2d1a.service`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := inst.Slot(tc.role, tc.gen, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			got := names{p.LaunchFile(), p.ExitPrefix(), p.LogSocket(), p.ErrLogSocket(), p.TerminalSocket(), p.UnitName()}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestSidecarNames(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("a-b", "c")
	if err != nil {
		t.Fatal(err)
	}
	type names struct{ Launch, Exit, Log, ErrLog, Unit, Cgroup string }
	tests := map[string]struct {
		sidecar string
		want    names
	}{
		"plain":  {"cache", names{"launch.sidecar.cache.json", "exit.sidecar.cache.", "/r/a-b/c/logs/sc.cache.sock", "", `unitlet-a\x2db-c-sidecar-cache.service`, "role-sidecar-cache"}},
		"dashed": {"log-shipper", names{"launch.sidecar.log-shipper.json", "exit.sidecar.log-shipper.", "/r/a-b/c/logs/sc.log-shipper.sock", "", `unitlet-a\x2db-c-sidecar-log\x2dshipper.service`, "role-sidecar-log-shipper"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := inst.Sidecar(tc.sidecar)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := p.Cgroup()
			if err != nil {
				t.Fatal(err)
			}
			got := names{p.LaunchFile(), p.ExitPrefix(), p.LogSocket(), p.ErrLogSocket(), p.UnitName(), cg}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if p.Role() != RoleSidecar || p.SidecarName() != tc.sidecar || p.Generation() != 0 {
				t.Errorf("slot %s %q %d", p.Role(), p.SidecarName(), p.Generation())
			}
			if !IsRoleCgroup(cg) {
				t.Errorf("IsRoleCgroup(%q) = false", cg)
			}
		})
	}
}

// No two slots of an instance share any per-process name, so one
// sidecar's start, kill or records never touch another's.
func TestSlotNamesAreDistinct(t *testing.T) {
	inst, _ := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("n", "x")
	var procs []Slot
	for _, s := range []string{"a", "ab", "a-b", "b", "seed", "g1", "cmd"} {
		p, err := inst.Sidecar(s)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	seed, _ := inst.RoleSlot(RoleSeed, 0)
	cmd, _ := inst.Command("a")
	cmd2, _ := inst.Command("b")
	g1, _ := inst.Generation(1)
	procs = append(procs, seed, cmd, cmd2, g1)
	seen := map[string]string{}
	for _, p := range procs {
		who := fmt.Sprintf("%s/%s%s/%d", p.Role(), p.SidecarName(), p.CommandName(), p.Generation())
		cg, _ := p.Cgroup()
		for kind, n := range map[string]string{"launch": p.LaunchFile(), "exit": p.ExitPrefix(), "log": p.LogSocket(), "unit": p.UnitName(), "cgroup": cg} {
			if n == "" {
				continue
			}
			if other, dup := seen[kind+" "+n]; dup {
				t.Errorf("%s and %s share %s %q", who, other, kind, n)
			}
			seen[kind+" "+n] = who
		}
	}
	// Exit prefixes end in a dot a name cannot hold: none matches another's records.
	for _, a := range procs {
		for _, b := range procs {
			if a != b && strings.HasPrefix(b.ExitPrefix(), a.ExitPrefix()) {
				t.Errorf("%q is a prefix of %q", a.ExitPrefix(), b.ExitPrefix())
			}
		}
	}
}

func TestSidecarRejectsBadNames(t *testing.T) {
	inst, _ := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("n", "x")
	tests := map[string]string{
		"empty":      "",
		"too long":   strings.Repeat("a", SidecarNameMax+1),
		"dot":        "a.b",
		"upper":      "Cache",
		"dash first": "-a",
		"slash":      "a/b",
	}
	for label, name := range tests {
		t.Run(label, func(t *testing.T) {
			if _, err := inst.Sidecar(name); !errors.Is(err, ErrBadSidecarName) {
				t.Errorf("Sidecar(%q): got %v, want ErrBadSidecarName", name, err)
			}
			if _, err := SidecarCgroup(name); !errors.Is(err, ErrBadSidecarName) {
				t.Errorf("SidecarCgroup(%q): got %v, want ErrBadSidecarName", name, err)
			}
		})
	}
	if _, err := inst.Sidecar(strings.Repeat("a", SidecarNameMax)); err != nil {
		t.Errorf("a %d-character name: %v", SidecarNameMax, err)
	}
	if _, err := inst.RoleSlot(RoleSidecar, 0); !errors.Is(err, ErrBadSidecarName) {
		t.Errorf("unnamed sidecar: got %v, want ErrBadSidecarName", err)
	}
	if _, err := inst.Slot(RoleSeed, 0, "a"); err == nil {
		t.Error("a seed with a sidecar name: want error")
	}
	if IsRoleCgroup("role-sidecar") || IsRoleCgroup("role-sidecar-") || IsRoleCgroup("g1") {
		t.Error("IsRoleCgroup accepts a name layout does not derive")
	}
}

func TestProcRejectsBadPairs(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("n", "x")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		role Role
		gen  int64
	}{
		"run without generation": {RoleApp, 0},
		"seed with generation":   {RoleSeed, 2},
		"sidecar without a name": {RoleSidecar, 0},
		"unknown role":           {Role("web"), 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := inst.RoleSlot(tc.role, tc.gen); err == nil {
				t.Fatal("want error")
			}
		})
	}
}

// A sibling generation's exit records must never share a prefix.
func TestExitPrefixesDoNotOverlap(t *testing.T) {
	inst, _ := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("n", "x")
	g1, _ := inst.Generation(1)
	g10, _ := inst.Generation(10)
	if strings.HasPrefix(g10.ExitPrefix()+"123", g1.ExitPrefix()) {
		t.Fatalf("%q matches records of %q", g1.ExitPrefix(), g10.ExitPrefix())
	}
}

func TestLongNamesShortenUnitNames(t *testing.T) {
	l := Layout{StateRoot: "/s", RunRoot: "/r"}
	label := strings.Repeat("a-b", 20)
	long := label + "." + label + "." + label
	inst, err := l.Instance("ns", long)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := inst.Generation(math.MaxInt64)
	if n := g.UnitName(); len(n) > 255 || !strings.HasPrefix(n, "unitlet-_"+inst.ShortID()+"-g") {
		t.Errorf("unit name %q (%d bytes)", n, len(n))
	}
	// The longest sidecar name, all dashes inside, escapes to 4 bytes each.
	sc, err := inst.Sidecar("a" + strings.Repeat("-", SidecarNameMax-2) + "a")
	if err != nil {
		t.Fatal(err)
	}
	if n := sc.UnitName(); len(n) > 255 || !strings.HasPrefix(n, "unitlet-_"+inst.ShortID()+"-sidecar-") {
		t.Errorf("unit name %q (%d bytes)", n, len(n))
	}
	if want := "unitlet-_" + inst.ShortID() + ".slice"; inst.SliceName() != want {
		t.Errorf("slice %q, want %q", inst.SliceName(), want)
	}
}

func TestLogFIFO(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("a-b", "c")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := inst.RoleSlot(RoleApp, 12)
	seed, _ := inst.RoleSlot(RoleSeed, 0)
	cmd, _ := inst.Command("r1")
	sc, err := inst.Sidecar("cache")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		p    Slot
		want string
	}{
		"generation": {g, "/r/a-b/c/logs/g12.fifo"},
		"seed":       {seed, "/r/a-b/c/logs/seed.fifo"},
		"sidecar":    {sc, "/r/a-b/c/logs/sc.cache.fifo"},
		"cmd":        {cmd, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.LogFIFO(); got != tc.want {
				t.Errorf("LogFIFO() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHasUnit(t *testing.T) {
	l := Layout{StateRoot: "/s", RunRoot: "/r"}
	inst := func(ns, name string) Instance {
		i, err := l.Instance(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	a := inst("a", "b")
	long := inst("ns", strings.Repeat("a-b", 20)+"."+strings.Repeat("a-b", 20))
	unit := func(i Instance, role Role, n int64, sidecar string) string {
		p, err := i.Slot(role, n, sidecar)
		if err != nil {
			t.Fatal(err)
		}
		return p.UnitName()
	}
	tests := map[string]struct {
		inst Instance
		name string
		want bool
	}{
		"its generation":                   {inst: a, name: unit(a, RoleApp, 3, ""), want: true},
		"its sidecar":                      {inst: a, name: unit(a, RoleSidecar, 0, "cache"), want: true},
		"its seed":                         {inst: a, name: unit(a, RoleSeed, 0, ""), want: true},
		"its slice is no service":          {inst: a, name: a.SliceName()},
		"a name that only starts alike":    {inst: a, name: unit(inst("a", "b-c"), RoleApp, 1, "")},
		"a namespace that only ends alike": {inst: a, name: unit(inst("x-a", "b"), RoleApp, 1, "")},
		"a long name's generation":         {inst: long, name: unit(long, RoleApp, 1, ""), want: true},
		"another long name's generation":   {inst: long, name: unit(inst("ns", strings.Repeat("b-a", 20)+"."+strings.Repeat("b-a", 20)), RoleApp, 1, "")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.inst.HasUnit(tc.name); got != tc.want {
				t.Errorf("HasUnit(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestPlacements(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r", CgroupRoot: "unitlet"}.Instance("a-b", "c")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := inst.Generation(3)
	got, err := g.Placements()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"unitlet/unitlet-a-b_c/g3", `unitlet.slice/unitlet-a\x2db.slice/unitlet-a\x2db-c.slice/unitlet-a\x2db-c-g3.service`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
