package units

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

func TestParseUnitNameInvertsUnitName(t *testing.T) {
	lay := layout.Layout{StateRoot: "/s", RunRoot: "/r"}
	type slot struct {
		NS, Name string
		Role     layout.Role
		Gen      int64
		Named    string // sidecar's or run's name
	}
	tests := map[string]slot{
		"generation":           {"ns1", "web", layout.RoleApp, 3, ""},
		"dashes and dots":      {"a-b", "c-d.e-f", layout.RoleApp, math.MaxInt64, ""},
		"seed":                 {"x", "y", layout.RoleSeed, 0, ""},
		"sidecar":              {"x-y", "z", layout.RoleSidecar, 0, "cache"},
		"dashed sidecar":       {"x", "y-z", layout.RoleSidecar, 0, "log-shipper-2"},
		"sidecar named seed":   {"x", "y", layout.RoleSidecar, 0, "seed"},
		"run":                  {"x", "y-z", layout.RoleCommand, 0, "run-7f3a"},
		"name that looks g<n>": {"g1", "g2", layout.RoleApp, 1, ""},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			inst, err := lay.Instance(want.NS, want.Name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := inst.Slot(want.Role, want.Gen, want.Named)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseUnitName(lay, p.UnitName())
			if err != nil {
				t.Fatal(err)
			}
			got := slot{back.Instance().Namespace(), back.Instance().Name(), back.Role(), back.Generation(), back.SidecarName() + back.CommandName()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseUnitNameRefuses(t *testing.T) {
	lay := layout.Layout{StateRoot: "/s", RunRoot: "/r"}
	label := strings.Repeat("a-b", 20)
	long, _ := lay.Instance("ns", label+"."+label+"."+label)
	g, _ := long.Generation(1)
	tests := map[string]string{
		"other prefix":      "postgres-ns-x-g1.service",
		"slice":             "unitlet-ns-x.slice",
		"too few parts":     "unitlet-ns-g1.service",
		"too many parts":    "unitlet-ns-x-y-g1.service",
		"generation zero":   "unitlet-ns-x-g0.service",
		"unknown role":      "unitlet-ns-x-web.service",
		"bad namespace":     "unitlet-NS-x-g1.service",
		"unnamed sidecar":   "unitlet-ns-x-sidecar.service",
		"named seed":        "unitlet-ns-x-seed-a.service",
		"bare dash in name": "unitlet-ns-x-sidecar-a-b.service",
		"dotted sidecar":    "unitlet-ns-x-sidecar-a.b.service",
		"short id instance": g.UnitName(),
	}
	for name, unit := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseUnitName(lay, unit); !errors.Is(err, ErrUnitName) {
				t.Errorf("ParseUnitName(%q) = %v, want ErrUnitName", unit, err)
			}
		})
	}
}
