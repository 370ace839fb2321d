package units

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/unitlet/unitlet/runtime/layout"
)

// ErrUnitName is wrapped when a unit name is not one layout derives, or
// is one that cannot be mapped back (an instance whose name was too long
// and became its short id).
var ErrUnitName = errors.New("units: not an invertible unitlet unit name")

// ParseUnitName maps a service name made by layout.Slot.UnitName back to
// its process slot, for re-adoption after a restart. Each part was
// escaped (a "-" inside namespace, name, sidecar or run name is \x2d), so
// the bare dashes separate exactly three parts, four for a sidecar or a
// run. The result must name the unit again.
//
// This belongs in runtime/layout, next to UnitName; it lives here until
// layout has it.
func ParseUnitName(lay layout.Layout, name string) (layout.Slot, error) {
	bad := func(why string) (layout.Slot, error) {
		return layout.Slot{}, fmt.Errorf("%w: %q: %s", ErrUnitName, name, why)
	}
	rest, ok := strings.CutPrefix(name, layout.UnitPrefix+"-")
	if !ok {
		return bad("no unitlet prefix")
	}
	rest, ok = strings.CutSuffix(rest, ".service")
	if !ok {
		return bad("not a service")
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 && len(parts) != 4 {
		return bad("not <namespace>-<name>-<slot> or <namespace>-<name>-{sidecar,cmd}-<name>")
	}
	inst, err := lay.Instance(unit.UnitNameUnescape(parts[0]), unit.UnitNameUnescape(parts[1]))
	if err != nil {
		return layout.Slot{}, fmt.Errorf("%w: %q: %w", ErrUnitName, name, err)
	}
	var p layout.Slot
	switch n, ok := layout.ParseGenerationCgroup(parts[2]); {
	case len(parts) == 4:
		p, err = inst.Slot(layout.Role(parts[2]), 0, unit.UnitNameUnescape(parts[3]))
	case ok:
		p, err = inst.Generation(n)
	default:
		p, err = inst.RoleSlot(layout.Role(parts[2]), 0)
	}
	if err != nil {
		return layout.Slot{}, fmt.Errorf("%w: %q: %w", ErrUnitName, name, err)
	}
	if p.UnitName() != name {
		return bad("does not name itself again")
	}
	return p, nil
}
