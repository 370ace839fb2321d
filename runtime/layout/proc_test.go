package layout

import (
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
	type names struct{ Launch, Exit, Log, ErrLog, Unit string }
	tests := map[string]struct {
		role Role
		gen  uint64
		want names
	}{
		"generation": {RoleRun, 12, names{"launch.gen.12.json", "exit.gen.12.", "/r/a-b/c/logs/g12.sock", "", `unitlet-a\x2db-c-g12.service`}},
		"seed":       {RoleSeed, 0, names{"launch.seed.json", "exit.seed.", "/r/a-b/c/logs/seed.sock", "", `unitlet-a\x2db-c-seed.service`}},
		"sidecar":    {RoleSidecar, 0, names{"launch.sidecar.json", "exit.sidecar.", "/r/a-b/c/logs/sidecar.sock", "", `unitlet-a\x2db-c-sidecar.service`}},
		"cmd":        {RoleCmd, 0, names{"launch.cmd.json", "exit.cmd.", "/r/a-b/c/logs/cmd.out.sock", "/r/a-b/c/logs/cmd.err.sock", `unitlet-a\x2db-c-cmd.service`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := inst.Proc(tc.role, tc.gen)
			if err != nil {
				t.Fatal(err)
			}
			got := names{p.LaunchFile(), p.ExitPrefix(), p.LogSocket(), p.ErrLogSocket(), p.UnitName()}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestProcRejectsBadPairs(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r"}.Instance("n", "x")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		role Role
		gen  uint64
	}{
		"run without generation": {RoleRun, 0},
		"seed with generation":   {RoleSeed, 2},
		"unknown role":           {Role("web"), 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := inst.Proc(tc.role, tc.gen); err == nil {
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
	g, _ := inst.Generation(^uint64(0))
	if n := g.UnitName(); len(n) > 255 || !strings.HasPrefix(n, "unitlet-"+inst.ShortID()+"-g") {
		t.Errorf("unit name %q (%d bytes)", n, len(n))
	}
	if want := "unitlet-" + inst.ShortID() + ".slice"; inst.SliceName() != want {
		t.Errorf("slice %q, want %q", inst.SliceName(), want)
	}
}
